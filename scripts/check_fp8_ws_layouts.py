#!/usr/bin/env python3
"""Host check of the warp-specialized fp8 decode kernel's shared-memory layouts
(src/ops/cuda/sm90/decode_fp8/{config_ws.h, transpose_ws.cuh, mainloop_ws.cuh}).

Emulates byte by byte: the TMA's 128-byte-swizzled slabs of a page (five 128 x 64 boxes), the three
transpose warps (ldmatrix.x4.trans lane results, select_even/odd, masked tail, the 4-byte stores at
vt_byte), the owner's P stores (p_byte, e4m3 words in the permuted key order), and the wgmma K-major
128B-swizzle descriptor reads (start address + row * 128 within 8-row groups of SBO 1024, the XOR of
address bits 4-6 with bits 7-9) for S = Q K^T (m64n64k32 x 18) and O = P V (m64n256k32 x 2 per
warpgroup). Checks S and O against numpy with integer data (exact), that every V^T byte is written once,
that masked keys read zero, and that the transpose's ldmatrix and stores are free of bank conflicts.
Run: python3 scripts/check_fp8_ws_layouts.py (needs numpy; no GPU).
"""
import numpy as np

rng = np.random.default_rng(7)
KEYS = 64; DQK = 576; DV = 512; SLAB = 8192


def swz(addr):  # 128B swizzle of a 1024-aligned buffer: 16-byte chunk bits 4-6 ^= bits 7-9
    return addr ^ (((addr >> 7) & 7) << 4)


def slab_offset(row, chunk):  # config.h
    return (chunk >> 3) * SLAB + row * 128 + (((chunk & 7) ^ (row & 7)) << 4)


def tma_tile(x):
    """x: [64, 576] bytes -> 40 KB slab tile as the TMA writes it (box 5 at column 512, zero-filled past 576)."""
    mem = np.zeros(5 * SLAB, dtype=np.int64)
    for slab in range(5):
        for r in range(64):
            for b in range(128):
                col = slab * 128 + b
                mem[swz(slab * SLAB + r * 128 + b)] = x[r, col] if col < DQK else 0
    return mem


def vt_byte(dim, group, t):  # the V^T layout (transpose_ws.cuh comment, config_ws.h)
    n, h = dim & 255, dim >> 8
    return n * 128 + (((4 * h + group) ^ (n & 7)) << 4) + 4 * t


def p_byte(row, half, group, t4):  # mainloop_ws.cuh
    return half // 2 * 8192 + row * 128 + (((4 * (half % 2) + group) ^ (row & 7)) << 4) + 4 * t4


def p_half_offset(h):  # config_ws.h
    return h // 2 * 8192 + 64 * (h % 2)


def banks_conflict_free(addrs, width):
    """addrs of one warp instruction; width bytes per lane. Conflict-free if each 128-byte wavefront's
    lanes (32 / (width / 4) per phase) touch distinct 4-byte banks."""
    per_phase = 128 // width
    for ph in range(0, 32, per_phase):
        banks = set()
        for a in addrs[ph:ph + per_phase]:
            for w in range(width // 4):
                b = ((a >> 2) + w) % 32
                if b in banks:
                    return False
                banks.add(b)
    return True


def sel(x, y, s):
    b = x + y
    return [b[(s >> (4 * j)) & 0xF] for j in range(4)]


def ldmatrix_trans(mem, addrs):
    """ldmatrix.x4.trans (b16): lane (g, t), matrix m -> bytes 2g, 2g+1 of rows 2t, 2t+1 of matrix m."""
    regs = []
    for lane in range(32):
        g, t = lane // 4, lane % 4
        r = []
        for m in range(4):
            r0, r1 = addrs[8 * m + 2 * t], addrs[8 * m + 2 * t + 1]
            r.append([int(mem[r0 + 2 * g]), int(mem[r0 + 2 * g + 1]), int(mem[r1 + 2 * g]), int(mem[r1 + 2 * g + 1])])
        regs.append(r)
    return regs


def transpose(page_mem, valid):
    """transpose_ws.cuh transpose_page_impl, lane by lane: warp w takes chunk pairs cp = w, w + 3, ...,
    four key groups each; returns V^T and checks it against the layout formula (vt_byte)."""
    vt = np.full(256 * 128, -1, dtype=np.int64)
    written = np.zeros(256 * 128, dtype=np.int64)
    for warp in range(3):
        for cp in range(warp, 16, 3):
            for group in range(4):
                addrs = []
                for lane in range(32):
                    key_in, chunk_in = (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4
                    a = slab_offset(key_in, 2 * cp + chunk_in) + group * 16 * 128
                    assert a == slab_offset(16 * group + key_in, 2 * cp + chunk_in)
                    addrs.append(a)
                for m in range(4):  # each 8x16 matrix: 8 row addresses, one 128-byte phase
                    assert banks_conflict_free(addrs[8 * m:8 * m + 8], 16), "ldmatrix conflict"
                regs = ldmatrix_trans(page_mem, addrs)
                for q in range(2):
                    st1, st2 = [], []
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        of = g >= 4
                        sel1 = 1 if of else 0
                        sel2 = 1 - sel1
                        r1, r2 = (2 * g + sel1) & 7, (2 * g + sel2) & 7
                        v = regs[lane]
                        k0 = 16 * group + 2 * t
                        keep = [k0 < valid, k0 + 1 < valid, k0 + 8 < valid, k0 + 9 < valid]
                        even = [b if k else 0 for b, k in zip(sel(v[2 * q], v[2 * q + 1], 0x6420), keep)]
                        odd = [b if k else 0 for b, k in zip(sel(v[2 * q], v[2 * q + 1], 0x7531), keep)]
                        n0 = ((32 * cp) & 255) + 16 * q + 2 * g
                        row1, row2 = (n0 + sel1) * 128 + 4 * t, (n0 + sel2) * 128 + 4 * t
                        c = 4 * (cp >> 3) + group
                        a1, a2 = row1 + ((c ^ r1) << 4), row2 + ((c ^ r2) << 4)
                        dim = 32 * cp + 16 * q + 2 * g
                        assert a1 == vt_byte(dim + sel1, group, t) and a2 == vt_byte(dim + sel2, group, t)
                        for a, w, lst in ((a1, odd if of else even, st1), (a2, even if of else odd, st2)):
                            lst.append(a)
                            for j in range(4):
                                vt[a + j] = w[j]
                                written[a + j] += 1
                    assert banks_conflict_free(st1, 4) and banks_conflict_free(st2, 4), "V^T store conflict"
    assert (written == 1).all(), "every V^T byte written exactly once"
    return vt


def transpose_stsm(page_mem, valid, warps=3, masked=True):
    """transpose_ws.cuh transpose_page_stsm_impl: same loads, byte permutes with lane-dependent selectors,
    one stmatrix.x4 per (chunk pair, group): register k of lane (g, t) = bytes 4t..4t+3 of row g of matrix
    k, stored at the address lane 8k + g supplies. masked=False: the unmasked loop (kTail false)."""
    vt = np.full(256 * 128, -1, dtype=np.int64)
    written = np.zeros(256 * 128, dtype=np.int64)
    for warp in range(warps):
        for cp in range(warp, 16, warps):
            for group in range(4):
                addrs = [slab_offset(16 * group + (l & 7) + 8 * ((l >> 3) & 1), 2 * cp + (l >> 4))
                         for l in range(32)]
                lm = ldmatrix_trans(page_mem, addrs)
                w = []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    of = lane >= 16
                    sa, sb = (0x7531, 0x6420) if of else (0x6420, 0x7531)
                    k0 = 16 * group + 2 * t
                    keep = [k0 < valid, k0 + 1 < valid, k0 + 8 < valid, k0 + 9 < valid] if masked else [1] * 4
                    ww = []
                    for q in range(2):
                        for sl in (sa, sb):
                            word = sel(lm[lane][2 * q], lm[lane][2 * q + 1], sl)
                            ww.append([b if kk else 0 for b, kk in zip(word, keep)])
                    w.append(ww)
                h = cp >> 3
                st_addr = []
                for lane in range(32):
                    k, r = lane >> 3, lane & 7
                    dim_off = 16 * (k >> 1) + 2 * r + ((1 if r < 4 else 0) if (k & 1) else (1 if r >= 4 else 0))
                    swz = dim_off & 7
                    row = (((32 * cp) & 255) + dim_off) * 128
                    a = row + (((4 * h + group) ^ swz) << 4)
                    assert a == vt_byte(32 * cp + dim_off, group, 0), "stmatrix row address vs layout"
                    st_addr.append(a)
                for k in range(4):
                    assert banks_conflict_free(st_addr[8 * k:8 * k + 8], 16), "stmatrix conflict"
                    for r in range(8):
                        a = st_addr[8 * k + r]
                        for t in range(4):
                            for j in range(4):
                                vt[a + 4 * t + j] = w[4 * r + t][k][j]
                                written[a + 4 * t + j] += 1
    assert (written == 1).all(), "every V^T byte written exactly once (stmatrix)"
    return vt


def zero_vt_tail(vt, valid, n_threads):
    """transpose_ws.cuh zero_vt_tail after the unmasked loop: (row, half) pairs tw, tw + n, ...; whole chunks
    of the groups past the tail's, byte masks (keep[w]) in the tail's group."""
    g0, r0 = valid >> 4, valid & 15
    keep = []
    for w in range(4):
        keep.append([2 * w < r0, 2 * w + 1 < r0, 8 + 2 * w < r0, 9 + 2 * w < r0])
    vt = vt.copy()
    for tw in range(n_threads):
        for i in range(tw, 512, n_threads):
            row, h = i >> 1, i & 1
            for g in range(g0, 4):
                addr = row * 128 + (((4 * h + g) ^ (row & 7)) << 4)
                for w in range(4):
                    for b in range(4):
                        a = addr + 4 * w + b
                        vt[a] = vt[a] if (g == g0 and r0 != 0 and keep[w][b]) else 0
    return vt


def key_of(kappa):  # kappa = 4t + 2a + e <-> key 8a + 2t + e (within a 16-key group)
    t, a, e = kappa // 4, (kappa // 2) % 2, kappa % 2
    return 8 * a + 2 * t + e


def desc_read(mem, start, rows, kbytes=32):
    """K-major SW128 operand: element (row, k) at swz(start + (row // 8) * 1024 + (row % 8) * 128 + k)."""
    out = np.zeros((rows, kbytes), dtype=np.int64)
    for r in range(rows):
        for k in range(kbytes):
            out[r, k] = mem[swz(start + (r // 8) * 1024 + (r % 8) * 128 + k)]
    return out


def check(valid):
    q = rng.integers(-8, 8, size=(64, DQK))
    kv = rng.integers(-8, 8, size=(64, DQK))
    kv[valid:] = 99  # garbage past the sequence end (stands for NaN codes)
    qm, km = tma_tile(q), tma_tile(kv)
    # S: 4 slabs x 4 steps, then 2 steps of the fifth slab
    s = np.zeros((64, 64), dtype=np.int64)
    for slab in range(5):
        for k in range(4 if slab < 4 else 2):
            off = slab * SLAB + 32 * k
            a = desc_read(qm, off, 64)
            b = desc_read(km, off, 64)
            s += a @ b.T
    assert (s == q @ kv.T).all(), "S"
    # V^T and P.V for both page parities and both warpgroups
    vt = transpose(km, valid)
    assert (transpose_stsm(km, valid) == vt).all(), "stmatrix transpose equals the 4-byte-store one"
    vu = transpose_stsm(km, valid, masked=False)  # kLdsm 4: unmasked loop on every page, tail page fixed up
    if valid < 64:
        vu = zero_vt_tail(vu, valid, 96)
    assert (vu == vt).all(), f"unmasked transpose + zero_vt_tail (valid {valid})"
    p = rng.integers(0, 5, size=(64, 64))
    for par in range(4):  # P halves (2 per 8 KB buffer)
        pm = np.zeros(2 * 64 * 128, dtype=np.int64)
        for row in range(64):
            for group in range(4):
                for t4 in range(4):
                    k0 = 16 * group + 2 * t4
                    keys = [k0, k0 + 1, k0 + 8, k0 + 9]
                    a = p_byte(row, par, group, t4)
                    for j, key in enumerate(keys):
                        pm[a + j] = p[row, key]
        for wg in range(2):
            o = np.zeros((64, 256), dtype=np.int64)
            for ks in range(2):
                a = desc_read(pm, p_half_offset(par) + 32 * ks, 64)
                b = desc_read(vt, 64 * wg + 32 * ks, 256)
                o += a @ b.T
            v = kv[:, 256 * wg:256 * wg + 256].copy()
            v[valid:] = 0
            assert (o == p @ v).all(), f"O (par {par}, wg {wg}, valid {valid})"
    # key order: V^T byte kappa of group G holds key 16G + key_of(kappa)
    for d in (0, 7, 255, 256, 511):
        for G in range(4):
            for kappa in range(16):
                n, h = d & 255, d >> 8
                byte = vt[n * 128 + (((4 * h + G) ^ (n & 7)) << 4) + kappa]
                key = 16 * G + key_of(kappa)
                assert byte == (kv[key, d] if key < valid else 0)


for valid in (64, 1, 16, 17, 48, 63):
    check(valid)

print("ok: S, V^T (transpose, tail zeros / zero_vt_tail, bank conflicts), P and O layouts of the ws fp8 kernel")
