#!/usr/bin/env python3
"""Host check of the fp8 decode kernel's fragment layouts (src/ops/cuda/sm90/decode_fp8/mainloop.cuh).

Emulates, lane by lane, ldmatrix (plain and .trans, b16), the byte permutes of traits.h and the 8-bit
mma.m16n8k32 fragment layouts (PTX ISA; the same as CUTLASS's SM80 16x8x32 8-bit atoms), runs the
kernel's address arithmetic for S = Q K^T and O += P V for every row-group variant (RG 1, 2, 4), and
checks S and O against numpy matmuls with integer data (exact). Also checks that the padded shared rows
(592 / 80 bytes) give conflict-free ldmatrix and that p_position is a pair-preserving permutation.
Run: python3 scripts/check_fp8_decode_layouts.py (needs numpy; no GPU).
"""
import numpy as np
rng = np.random.default_rng(1)
ROW = 592; PROW = 80; KEYS = 64; DQK = 576; DV = 512

def rd4(mem, addr): return [int(mem[addr + j]) for j in range(4)]

def ldmatrix_x4(mem, addrs, trans=False):
    # addrs[l] = row address supplied by lane l; matrix i rows from lanes 8i..8i+7
    regs = [[None]*4 for _ in range(32)]
    for i in range(4):
        rows = [addrs[8*i + r] for r in range(8)]
        for T in range(32):
            if not trans:
                regs[T][i] = rd4(mem, rows[T // 4] + (T % 4) * 4)
            else:
                r0 = rows[2*(T % 4)]; r1 = rows[2*(T % 4) + 1]; c = T // 4
                regs[T][i] = [int(mem[r0 + 2*c]), int(mem[r0 + 2*c + 1]), int(mem[r1 + 2*c]), int(mem[r1 + 2*c + 1])]
    return regs

def prmt(x, y, sel):
    b = x + y
    return [b[(sel >> (4*j)) & 0xF] for j in range(4)]

def mma(c, a, b):
    # c[T] = 4 floats, a[T] = 4 regs of 4 bytes, b[T] = 2 regs; 8-bit m16n8k32 layout
    A = np.zeros((16, 32)); B = np.zeros((32, 8))
    for T in range(32):
        g, t = T // 4, T % 4
        for i in range(16):
            reg, j = i // 4, i % 4
            row = g if (i < 4 or 8 <= i < 12) else g + 8
            col = t*4 + (i & 3) + (16 if i >= 8 else 0)
            A[row, col] = a[T][reg][j]
        for i in range(8):
            reg, j = i // 4, i % 4
            row = t*4 + (i & 3) + (16 if i >= 4 else 0)
            B[row, g] = b[T][reg][j]
    D = A @ B
    for T in range(32):
        g, t = T // 4, T % 4
        c[T][0] += D[g, 2*t]; c[T][1] += D[g, 2*t+1]; c[T][2] += D[g+8, 2*t]; c[T][3] += D[g+8, 2*t+1]

def p_position(key):
    r = key & 31
    return (key & ~31) + (r & 16) + ((r >> 1) & 3) * 4 + ((r >> 3) & 1) * 2 + (r & 1)

def slab_offset(row, chunk):
    return (chunk >> 3) * 64 * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4)

def run_slab_pv():
    # 64-row wgmma-S variant: P.V on mma.sync with the page in the slab layout (accumulate_pv<4, true>).
    RG = 4; slices = 2; kCols = 256; kVChunks = 16
    K = rng.integers(-3, 4, size=(KEYS, DQK)); P = rng.integers(0, 5, size=(64, KEYS))
    mem = np.zeros(200000, dtype=np.int64); KB, PB = 0, 100000
    for r in range(KEYS):
        for c in range(DQK // 16):
            mem[KB + slab_offset(r, c): KB + slab_offset(r, c) + 16] = K[r, 16*c:16*c + 16]
    for row in range(64):
        for key in range(0, 64, 2):
            pos = p_position(key); mem[PB + row*PROW + pos] = P[row, key]; mem[PB + row*PROW + pos + 1] = P[row, key + 1]
    O_ref = P @ K[:, :DV]
    for warp in range(8):
        rg, ws = warp % RG, warp // RG
        o = [[[0.0]*4 for _ in range(32)] for _ in range(2*kVChunks)]
        for ks in range(2):
            a = ldmatrix_x4(mem, [PB + (rg*16 + (l & 15))*PROW + ks*32 + ((l >> 4) << 4) for l in range(32)])
            for c in range(kVChunks):
                cg = ws*kVChunks + c
                addrs = [KB + slab_offset(ks*32 + l, cg) for l in range(32)]
                for i in range(4):  # each 8-key matrix conflict-free
                    assert len({(addrs[8*i + r] % 128) // 16 for r in range(8)}) == 8
                v = ldmatrix_x4(mem, addrs, trans=True)
                be = [[prmt(v[T][0], v[T][1], 0x6420), prmt(v[T][2], v[T][3], 0x6420)] for T in range(32)]
                bo = [[prmt(v[T][0], v[T][1], 0x7531), prmt(v[T][2], v[T][3], 0x7531)] for T in range(32)]
                mma(o[2*c], a, be); mma(o[2*c+1], a, bo)
        for T in range(32):
            g, t4 = T // 4, T % 4
            for h in range(2):
                row = rg*16 + g + 8*h
                for c in range(kVChunks):
                    d0 = ws*kCols + 4*t4 + 16*c
                    vals = [o[2*c][T][2*h], o[2*c+1][T][2*h], o[2*c][T][2*h+1], o[2*c+1][T][2*h+1]]
                    assert vals == list(O_ref[row, d0:d0+4].astype(float)), ("slab O", warp, T, h, c)
    # the slab copy is a bijection of the 36 chunks per row into the 5 allocated slabs
    offs = {slab_offset(r, c) for r in range(64) for c in range(36)}
    assert len(offs) == 64 * 36 and max(offs) < 5 * 64 * 128
    print("slab P.V layout OK")

def run(RG):
    slices = 8 // RG; kKeys = KEYS // slices; kSTiles = kKeys // 8; kCols = DV // slices; kVChunks = kCols // 16
    Q = rng.integers(-3, 4, size=(RG*16, DQK)); K = rng.integers(-3, 4, size=(KEYS, DQK))
    P = rng.integers(0, 5, size=(RG*16, KEYS))
    mem = np.zeros(200000, dtype=np.int64)
    QB, KB, PB = 0, 40000, 100000
    for r in range(RG*16): mem[QB + r*ROW: QB + r*ROW + DQK] = Q[r]
    for r in range(KEYS): mem[KB + r*ROW: KB + r*ROW + DQK] = K[r]
    S_ref = Q @ K.T; O_ref = P @ K[:, :DV]
    # S per warp (compute_scores: Q from smem)
    for warp in range(8):
        rg, ws = warp % RG, warp // RG
        s = [[[0.0]*4 for _ in range(32)] for _ in range(kSTiles)]
        for m in range(DQK // 64):
            a0 = ldmatrix_x4(mem, [QB + (rg*16 + (l & 15))*ROW + m*64 + ((l >> 4) << 4) for l in range(32)])
            a1 = ldmatrix_x4(mem, [QB + (rg*16 + (l & 15))*ROW + m*64 + 32 + ((l >> 4) << 4) for l in range(32)])
            for t in range(kSTiles):
                bk = ldmatrix_x4(mem, [KB + (ws*kKeys + (l & 7))*ROW + ((l >> 3) << 4) + t*8*ROW + m*64 for l in range(32)])
                mma(s[t], a0, [[bk[T][0], bk[T][1]] for T in range(32)])
                mma(s[t], a1, [[bk[T][2], bk[T][3]] for T in range(32)])
        for T in range(32):
            g, t4 = T // 4, T % 4
            for t in range(kSTiles):
                for e in range(4):
                    row = rg*16 + g + 8*(e >> 1); key = ws*kKeys + t*8 + 2*t4 + (e & 1)
                    assert s[t][T][e] == S_ref[row, key], ("S", RG, warp, T, t, e)
                    # write P as the kernel does (pair at p_position(key even))
                for h in range(2):
                    key = ws*kKeys + t*8 + 2*t4
                    row = rg*16 + g + 8*h
                    pos = p_position(key)
                    mem[PB + row*PROW + pos] = P[row, key]; mem[PB + row*PROW + pos + 1] = P[row, key + 1]
    # O per warp (accumulate_pv)
    for warp in range(8):
        rg, ws = warp % RG, warp // RG
        o = [[[0.0]*4 for _ in range(32)] for _ in range(2*kVChunks)]
        for ks in range(2):
            a = ldmatrix_x4(mem, [PB + (rg*16 + (l & 15))*PROW + ks*32 + ((l >> 4) << 4) for l in range(32)])
            for c in range(kVChunks):
                v = ldmatrix_x4(mem, [KB + (ks*32 + l)*ROW + ws*kCols + c*16 for l in range(32)], trans=True)
                be = [[prmt(v[T][0], v[T][1], 0x6420), prmt(v[T][2], v[T][3], 0x6420)] for T in range(32)]
                bo = [[prmt(v[T][0], v[T][1], 0x7531), prmt(v[T][2], v[T][3], 0x7531)] for T in range(32)]
                mma(o[2*c], a, be); mma(o[2*c+1], a, bo)
        for T in range(32):
            g, t4 = T // 4, T % 4
            for h in range(2):
                row = rg*16 + g + 8*h
                for c in range(kVChunks):
                    d0 = ws*kCols + 4*t4 + 16*c
                    vals = [o[2*c][T][2*h], o[2*c+1][T][2*h], o[2*c][T][2*h+1], o[2*c+1][T][2*h+1]]
                    assert vals == list(O_ref[row, d0:d0+4].astype(float)), ("O", RG, warp, T, h, c, vals, O_ref[row, d0:d0+4])
    print("RG", RG, "S and O layouts OK")

# bank-conflict check of the padded rows: 8 rows at one chunk hit 8 distinct 16-byte bank groups
for stride in (ROW, PROW):
    assert len({((r*stride) % 128) // 16 for r in range(8)}) == 8
# p_position is a permutation of 0..63 and keeps (even, odd) pairs adjacent
assert sorted(p_position(k) for k in range(64)) == list(range(64))
assert all(p_position(k) + 1 == p_position(k + 1) for k in range(0, 64, 2))
for RG in (1, 2, 4): run(RG)
run_slab_pv()
