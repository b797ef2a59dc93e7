#pragma once
// Dynamic tail stealing for the 64-row ws kernel (kernel_ws.cuh), a prototype behind MLA_DECODE_FP8_STEAL
// (launch_impl_ws.cuh; unset or 0: off, the kernel runs its static part exactly as before).
//
// Why: at h128 b128 the static plan gives every CTA whole sequences (124 CTAs 2, 8 CTAs 1 at s4096 / s8192), and the
// CTAs on about half the TPCs stream ~5.5 % slower; the call ends with the slowest CTA, up to 29 us after the median
// (NOTES_plan.md session 7). Cutting sequences statically costs more than it saves (+12-18 us: partials of ~190
// splits through the combine), so the balance is made at run time, and only where a CTA is actually late.
//
// Protocol (per head tile y; CTA (x, y) owns part x):
//  - Zone of part x: the last Z pages of the part's last sequence b (fewer when b is short: at most nblk - 3, a
//    multiple of C), when the part holds b whole (one split: its partial slot split_offsets[b] is free) and a spare
//    slot split_offsets[batch] + x < max_splits exists for a thief. The zone is cut into k = Z / C chunks at
//    lo_i = zlo + i C. steal_zone_of() computes it the same way in every CTA and role.
//  - word[y][x] (global, zero between calls): bits 0-7 n = chunks the owner claimed, bits 8-15 s + 1 when a thief
//    took chunks s .. k-1 (0: none), bits 16-23 k, or kNoZone for a part without a zone. After its first page the
//    owner's producer marks its word: k << 16 (atomicCAS from 0, so a thief's earlier claim is never overwritten) or
//    kNoZone, so scans skip parts without a zone without loading records. prog[y][x]: the pages the owner's producer
//    has left in the zone's sequence (plain stores, every page; 0: not there yet).
//  - The owner's producer thread claims chunk i at page lo_i - 2 with atomicCAS(word: i | k -> i + 1 | k). If it fails,
//    a thief holds chunks from s >= i on: the owner's sequence ends at lo_s. Pages lo_i - 2 and lo_i - 1 come after the
//    claim, so every role sees the shortened sequence before its last two pages (the Q tile's release needs that).
//  - A CTA that ran out of work (its own part and every tail it took so far) reads the words of the other parts of its
//    head tile, picks the part furthest from its end and takes its last chunks s .. k-1, as many as end the thief and
//    the owner about together and are worth a steal (steal_scan), with atomicCAS(word: w -> w | (s + 1) << 8) on the
//    word value w it read. One thief per part; a chunk is walked by exactly the CTA whose CAS covered it: correctness
//    never depends on who is faster, only the balance does. Z = C = T is the fixed-tail mode (one chunk: the owner
//    or one thief walks the last T pages).
//  - A stolen tail splits b in two pieces: the owner's [0, lo_s) and the thief's [lo_s, nblk). Each writes its
//    normalized partial + lse (owner: slot split_offsets[b], thief: split_offsets[batch] + x); at the CTA's end each
//    piece is counted on done[y][x] after a fence, and the CTA that counts second merges both partials into out / lse.
//    No one waits for anyone.
//  - Deterministic mode (dT, fixed tails only): the owner that wins its tail walks it as a piece of its own too, so
//    every tail is a split whoever walks it and the result does not depend on timing (at the price of the split).
//  - The decisions reach every role of the CTA through shared memory and one single-use mbarrier per event (each
//    claim of the owner; each steal scan, the last of which says 'none'), published by the producer thread, which
//    reaches each point first.
//  - Reset without a host step: every CTA counts itself done (atomicInc on ctas_done, which wraps to 0); the last one
//    zeroes the words for the next call (graph replays, several layers per plan). The words live in a module
//    __device__ array (zero at load) -- prototype: two mla_decode calls running at once on different streams would
//    share them; a production version keeps them in the workspace, zeroed by the plan.
#include <cstdint>

#include "mla/ops/plan_decode.h"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"

namespace mla::sm90::decode_fp8 {

constexpr int kStealMaxCtas = 2048;  // grid CTAs the words cover (kind = 2 x + 1 < 4096); larger grids don't steal
constexpr int kStealEvents = kWsStealEvents;  // decisions per CTA: the owner's claims + steal scans (+ 'none')
constexpr int kStealScanBatch = 4;   // words loaded at once by a scan (independent loads in flight)
// Parts a scan looks at: x + 1 .. x + kStealScanWindow. Every CTA scans at least once at its end (to find nothing, in
// the common case), so the scan's round trips (one per batch, ~0.7 us each) are on the call's critical path: all 65
// other parts took 9 in run 1.
constexpr int kStealScanWindow = 12;
constexpr int kStealScanTries = 3;   // scans per event before the thief gives up (a lost CAS rescans)
constexpr int kStealOvhPages = 6;    // a steal's fixed cost to the thief, in pages (steal_scan)
constexpr int kStealMinPages = 4;    // no smaller steals
constexpr int kNoZone = 1 << 30;

struct StealWords {
  int claim[kStealMaxCtas];  // [y * gridDim.x + x]: the word above
  int prog[kStealMaxCtas];   // pages of its zone's sequence the owner's producer has left (0: not there yet)
  int done[kStealMaxCtas];   // pieces of a stolen tail's sequence counted
  unsigned int ctas_done;    // CTAs of the current call that finished (wraps to 0 at the last)
};
static __device__ StealWords g_steal;

// Shared-memory block of the protocol (kernel_ws.cuh puts it in its barrier area, config_ws.h kWsSteal*).
struct StealShared {
  uint32_t bars;  // kStealEvents single-use mbarriers (count 1: the producer thread)
  int* info;      // [kStealEvents][4]: claim: {stolen, -1, lo_s, 0}; steal: {x, b, lo, seqlen}; none: {-1, -2, 0, 0}
  int* pend;      // [kStealEvents]: b << 12 | kind of a piece this CTA merges, or -1 (steal_finish)
  __device__ uint32_t bar(int e) const { return bars + 8 * e; }
};

struct StealZone {
  int b = -1, zlo = 0, k = 0, seqlen = 0;
};

__device__ __forceinline__ int steal_word(int x) { return blockIdx.y * gridDim.x + x; }
__device__ __forceinline__ int cfg_z(int cfg) { return cfg & 255; }
__device__ __forceinline__ int cfg_c(int cfg) { return (cfg >> 8) & 255; }

// The zone of part x (b = -1: none), identical in every CTA and role for the same plan.
__device__ __forceinline__ StealZone steal_zone_of(const decode::DecodeKernelParams& p, int x, int cfg) {
  StealZone z;
  const int32_t* rec = p.parts + static_cast<int64_t>(x) * kPlanPartInts;
  const int bb = rec[kPartBeginBatch], eb = rec[kPartEndBatch], ebk = rec[kPartEndBlock];
  const int lb = ebk > 0 ? eb : eb - 1;
  // lb == bb: the part must start at lb's first block (a record that begins at lb's end holds none of it).
  if (lb < bb || lb >= p.batch || lb < 0 || (lb == bb && rec[kPartBeginBlock] != 0)) return z;
  const int n_splits = p.split_offsets[lb + 1] - p.split_offsets[lb];
  const int seqlen = p.seqlens[lb];
  const int nblk = decode_num_blocks(seqlen);
  const int slot_b = p.split_offsets[p.batch] + x;
  const int c = cfg_c(cfg);
  const int zone = min(cfg_z(cfg), (nblk - 3) / c * c);  // the owner keeps >= 3 pages before its first claim
  // One split: the part holds all of lb (so ebk, when given, is its end); the thief's slot below max_splits.
  if (n_splits != 1 || zone < c || (ebk > 0 && ebk != nblk) || slot_b >= p.batch + static_cast<int>(gridDim.x) - 1)
    return z;
  z.b = lb;
  z.zlo = nblk - zone;
  z.k = zone / c;
  z.seqlen = seqlen;
  return z;
}

__device__ __forceinline__ void st_relaxed(int* a, int v) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(a), "r"(v) : "memory");
}

__device__ __forceinline__ int ld_relaxed(const int* a) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}

// Producer thread: a tail worth taking (res[0] = x, or -1: none). The victim: of the next kStealScanWindow parts, the
// open one (no thief yet, a zone) whose owner has the most pages left by its progress word (not yet in its zone's
// sequence counts as furthest). The amount: the largest whole number of chunks S with thief and owner ending about
// together, S <= (R - kStealOvhPages) / 2 for the owner's R pages left, and S >= kStealMinPages -- a steal costs the
// thief a scan, a Q tile and a pipeline fill, an epilogue of fp32 partials and a merge, ~kStealOvhPages pages of
// streaming, so a smaller one ends later than the owner would have (run 1: without this check thieves took 2-4 page
// tails until their events ran out, +40-290 us). The common case, nothing worth taking, costs the window's loads
// (kStealScanWindow / kStealScanBatch round trips) and no record loads. res = {x, b, lo, seqlen}.
__device__ __forceinline__ void steal_scan(const decode::DecodeKernelParams& p, int cfg, int (&res)[4]) {
  res[0] = -1;
  const int np = gridDim.x, c = cfg_c(cfg), window = min(np, kStealScanWindow + 1);
  int skip = -1;  // a candidate found not worth it by its zone (short sequences)
#pragma unroll 1
  for (int attempt = 0; attempt < kStealScanTries; ++attempt) {
    int best = -1, best_w = 0, best_r = 0;
#pragma unroll 1
    for (int k0 = 1; k0 < window; k0 += kStealScanBatch) {
      int w[kStealScanBatch], r[kStealScanBatch];
#pragma unroll
      for (int i = 0; i < kStealScanBatch; ++i) {
        const int x = (static_cast<int>(blockIdx.x) + k0 + i) % np;
        w[i] = k0 + i < window ? ld_relaxed(&g_steal.claim[steal_word(x)]) : kNoZone;
        r[i] = k0 + i < window ? ld_relaxed(&g_steal.prog[steal_word(x)]) : 0;
      }
#pragma unroll
      for (int i = 0; i < kStealScanBatch; ++i) {
        const int x = (static_cast<int>(blockIdx.x) + k0 + i) % np;
        const int left = r[i] == 0 ? (1 << 20) : r[i] + 2;  // + 2: the owner's consumers trail its producer
        if ((w[i] & 0x4000ff00) == 0 && left > best_r && x != skip) {
          best = x;
          best_w = w[i];
          best_r = left;
        }
      }
    }
    if (best < 0 || (best_r - kStealOvhPages) / 2 < kStealMinPages) return;
    const StealZone z = steal_zone_of(p, best, cfg);
    if (z.b < 0) {
      g_steal.claim[steal_word(best)] = kNoZone;  // only thieves and the owner store kNoZone, only where no zone exists
      continue;
    }
    const int n = best_w & 255, left = min(best_r, decode_num_blocks(z.seqlen));
    const int pages = min(((left - kStealOvhPages) / 2) / c, z.k - n) * c;
    if (pages < c || pages < kStealMinPages) {
      skip = best;
      continue;
    }
    const int s = z.k - pages / c;
    if (atomicCAS(&g_steal.claim[steal_word(best)], best_w, best_w | ((s + 1) << 8)) == best_w) {
      res[0] = best;
      res[1] = z.b;
      res[2] = z.zlo + s * c;
      res[3] = z.seqlen;
      return;
    }
  }
}

// The part cursor plus the steal protocol. kind: -1 a normal segment; 2 x: the owner's piece of a sequence whose
// tail (part x = this CTA's) was stolen; 2 x + 1: a tail stolen from part x.
struct StealCursor : decode::PartCursor {
  int cfg = 0;                   // Z | C << 8 | det << 16 (launch_impl_ws.cuh; 0: stealing off)
  int dec_b = -1, dec_blk = -1;  // the owner's next claim: at page dec_blk (lo_i - 2) of sequence dec_b
  int dec_last = -1, dec_k1 = 0;  // ... its last one (lo_{k-1} - 2), and k - 1
  int own_lo = 0;                // deterministic mode, producer: the won own tail still to walk starts here (0: none)
  int evt = 0;                   // next event index
  int kind = -1;

  __device__ void init(const decode::DecodeKernelParams& p, const int32_t* rec, int steal) {
    decode::PartCursor::init(p, rec);
    cfg = steal;
    if (cfg != 0 && valid()) {
      const StealZone z = steal_zone_of(p, blockIdx.x, cfg);
      if (z.b >= 0) {
        dec_b = z.b;
        dec_blk = z.zlo - 2;
        dec_last = z.zlo + (z.k - 1) * cfg_c(cfg) - 2;
        dec_k1 = z.k - 1;
      }
    }
  }

  // Producer thread, after its first page's TMA: the word's k field (or kNoZone), for thieves' scans. The CAS's result
  // is not needed (a thief that came first holds the word; the first claim finds out).
  __device__ __forceinline__ void publish_zone() const {
    if (cfg == 0) return;
    int* w = &g_steal.claim[steal_word(blockIdx.x)];
    if (dec_b >= 0) {
      atomicCAS(w, 0, (dec_k1 + 1) << 16);
    } else {
      *w = kNoZone;
    }
  }

  // advance(), then the owner's claim when the cursor reaches a claim page. kLeader: the producer thread.
  template <bool kLeader>
  __device__ __forceinline__ void step(const decode::DecodeKernelParams& p, const StealShared& sh) {
    advance(p);
    if constexpr (kLeader) {
      if (b == dec_b && kind < 0) st_relaxed(&g_steal.prog[steal_word(blockIdx.x)], hi - blk);
    }
    if (blk == dec_blk && b == dec_b) claim<kLeader>(sh);
  }

  // When the cursor ran out: the next stolen tail, or false when there is none (the CTA is done).
  template <bool kLeader>
  __device__ __forceinline__ bool more(const decode::DecodeKernelParams& p, const StealShared& sh) {
    if (cfg == 0 || evt >= kStealEvents) return false;
    int r[4];
    if constexpr (kLeader) {
      if (own_lo > 0) {  // deterministic mode: the own tail first, as a piece of its own
        r[0] = blockIdx.x;
        r[1] = dec_b;
        r[2] = own_lo;
        r[3] = p.seqlens[dec_b];
        own_lo = 0;
      } else if (evt < kStealEvents - 1) {
        steal_scan(p, cfg, r);
      } else {
        r[0] = -1;
      }
      if (r[0] < 0) r[1] = -2;
#pragma unroll
      for (int i = 0; i < 4; ++i) sh.info[4 * evt + i] = r[i];
      decode::mbar_arrive(sh.bar(evt));
    } else {
      decode::mbar_wait(sh.bar(evt), 0);
#pragma unroll
      for (int i = 0; i < 4; ++i) r[i] = reinterpret_cast<volatile int*>(sh.info)[4 * evt + i];
    }
    ++evt;  // events consumed, the final 'none' included (steal_finish reads them back)
    if (r[0] < 0) return false;
    kind = 2 * r[0] + 1;
    b = r[1];
    blk = r[2];
    seqlen = r[3];
    hi = decode_num_blocks(seqlen);
    end_b = b;
    end_blk = hi;
    hint = next_hint = -1;
    if constexpr (kLeader) fetch_page(p);
    return true;
  }

 private:
  // The owner's claim of chunk i at page lo_i - 2 (cursor at (dec_b, dec_blk)).
  template <bool kLeader>
  __device__ __forceinline__ void claim(const StealShared& sh) {
    const int c = cfg_c(cfg), lo = dec_blk + 2;
    int split, end_lo;  // split: the sequence ends at end_lo for this walk
    if constexpr (kLeader) {
      const int idx = dec_k1 - (dec_last - dec_blk) / c;  // chunk i: the last one (k - 1) is claimed at dec_last
      const int kf = (dec_k1 + 1) << 16, expect = idx | kf;  // publish_zone set kf before any claim
      const int old = atomicCAS(&g_steal.claim[steal_word(blockIdx.x)], expect, (idx + 1) | kf);
      const bool stolen = old != expect;
      // A thief's s >= idx (it takes only unclaimed chunks); lo_s = lo + (s - idx) c.
      end_lo = stolen ? lo + (((old >> 8) & 255) - 1 - idx) * c : lo;
      split = stolen || (cfg >> 16) != 0;
      if ((cfg >> 16) != 0 && !stolen) own_lo = lo;
      sh.info[4 * evt] = split;
      sh.info[4 * evt + 1] = -1;
      sh.info[4 * evt + 2] = end_lo;
      decode::mbar_arrive(sh.bar(evt));
    } else {
      decode::mbar_wait(sh.bar(evt), 0);
      split = reinterpret_cast<volatile int*>(sh.info)[4 * evt];
      end_lo = reinterpret_cast<volatile int*>(sh.info)[4 * evt + 2];
    }
    ++evt;
    dec_blk = split || dec_blk >= dec_last ? -1 : dec_blk + c;
    if (split) {
      end_b = b;
      end_blk = end_lo;
      hi = end_lo;
      kind = 2 * static_cast<int>(blockIdx.x);
    }
  }
};

// Partial slot of a split piece (kind >= 0) of sequence b.
__device__ __forceinline__ int steal_slot(const decode::DecodeKernelParams& p, int kind, int b) {
  return (kind & 1) ? p.split_offsets[p.batch] + (kind >> 1) : p.split_offsets[b];
}

// The 256 consumer threads, once the CTA's last segment is written (partials included): count each split piece this
// CTA wrote (its own sequence whose tail was stolen, each stolen tail) on the piece's done word; where the other piece
// counted first, merge both partials of the sequence's rows in this tile into out / lse. Counting here rather than in
// each piece's epilogue keeps the protocol out of the consumer loop (there, a queue of merges made ptxas spill 150-190
// bytes of the consumers' 224 registers). own_b: the sequence of this CTA's zone (cursor dec_b); events: the
// cursor's evt (events published). bar_id: a 256-thread named barrier of the consumers.
__device__ __forceinline__ void steal_finish(const decode::DecodeKernelParams& p, const StealShared& sh, int own_b,
                                             int events, int tile_row0, int valid_rows, int ctid,
                                             int bar_id) {
  __threadfence();  // this thread's partial stores, before the counts below
  decode::named_sync(bar_id, 256);
  if (ctid < events) {
    const volatile int* info = sh.info + 4 * ctid;
    int kind = -1, b = 0;
    if (info[1] == -1) {  // one of this CTA's claims of its own chunks: the one that split its sequence
      if (info[0] != 0) kind = 2 * static_cast<int>(blockIdx.x), b = own_b;
    } else if (info[1] >= 0) {  // a tail walked here (stolen, or this CTA's own in deterministic mode)
      kind = 2 * info[0] + 1, b = info[1];
    }
    int v = -1;
    if (kind >= 0 && atomicAdd(&g_steal.done[steal_word(kind >> 1)], 1) != 0) v = (b << 12) | kind;
    sh.pend[ctid] = v;
  }
  decode::named_sync(bar_id, 256);
  __threadfence();
#pragma unroll 1
  for (int k = 0; k < events; ++k) {
    const int v = reinterpret_cast<volatile int*>(sh.pend)[k];
    if (v < 0) continue;
    const int b = v >> 12, kind = v & 4095;
    const int64_t sa = p.split_offsets[b], sb = p.split_offsets[p.batch] + (kind >> 1);
    // 128 float4 per row; the rows of this tile: tile_row0 .. tile_row0 + valid_rows - 1.
    for (int i = ctid; i < valid_rows * 128; i += 256) {
      const int row = tile_row0 + (i >> 7), c = (i & 127) * 4;
      const float la = __ldcg(p.lse_accum + sa * p.rows + row), lb = __ldcg(p.lse_accum + sb * p.rows + row);
      const float m = fmaxf(la, lb);
      float wa = 0.f, wb = 0.f, lse = -INFINITY;
      if (m != -INFINITY) {  // both -inf: the row sees no key of b (out 0, lse -inf, as the combine writes)
        wa = expf(la - m);
        wb = expf(lb - m);
        const float s = wa + wb;
        lse = m + logf(s);
        wa /= s;
        wb /= s;
      }
      const float4 oa = __ldcg(reinterpret_cast<const float4*>(p.o_accum + (sa * p.rows + row) * kDimV + c));
      const float4 ob = __ldcg(reinterpret_cast<const float4*>(p.o_accum + (sb * p.rows + row) * kDimV + c));
      uint2 o;
      o.x = decode::Bf16Traits::pack(wa * oa.x + wb * ob.x, wa * oa.y + wb * ob.y);
      o.y = decode::Bf16Traits::pack(wa * oa.z + wb * ob.z, wa * oa.w + wb * ob.w);
      uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + c;
      *reinterpret_cast<uint2*>(out) = o;
      if (c == 0) {
        const int qi = row / p.h_q, hh = row % p.h_q;
        p.lse[(static_cast<int64_t>(b) * p.h_q + hh) * p.s_q + qi] = lse;
      }
    }
  }
}

// One thread per CTA, after every steal-word access of the CTA: the last CTA of the call zeroes the words.
__device__ __forceinline__ void steal_cta_done() {
  __threadfence();
  const unsigned int n = gridDim.x * gridDim.y;
  if (atomicInc(&g_steal.ctas_done, n - 1) != n - 1) return;
  for (unsigned int i = 0; i < n; ++i) {
    g_steal.claim[i] = 0;
    g_steal.prog[i] = 0;
    g_steal.done[i] = 0;
  }
}

}  // namespace mla::sm90::decode_fp8
