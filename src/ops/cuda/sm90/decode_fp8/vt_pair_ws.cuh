#pragma once
// The head-tile pair's split V^T (MLA_FP8_WS_PAIR_SPLIT, session 71; design: bench/decode/NOTES.md "Session 70" 4).
// At h_q 128 the two 64-row head tiles of a plan part read and transpose the same pages. Launched as a (1, 2, 1)
// cluster (../decode/launch_kernel.cuh), the CTA of rank r transposes only half r of each page's V^T (dims 256 r ..
// 256 r + 255, chunk pairs 8 r .. 8 r + 7: 3 / 3 / 2 rounds a transpose warp instead of 6 / 5 / 5) into its own stage,
// in the halves layout (config_ws.h), and copies each chunk pair it stored (2 KB) into the peer's same stage with a
// bulk copy that completes on the peer's vt_full. A stage is whole once this CTA's 96 transpose threads arrived (one
// of them expecting the peer's 16 KB) and the peer's copies landed. Knock-out 4096 (session 70) bounds the gain:
// fp8 rows 15 / 17 / 18 -9.4 / -8.2 / -9.4 % on an H100, without the copies.
//
// Order (per V^T stage v, page j in it, j + 2 next):
//  - peer_free(v), a barrier of this CTA: the peer's consumer warpgroup that reads the half this CTA sends (its
//    warpgroup `rank`) released page j (4 remote arrivals, one per warp). The transposers wait for it, with their
//    own consumers' vt_empty, before the first store of page j + 2: the copy then lands on nothing the peer still
//    reads, and the source half (read by page j's copy, whose completion only the peer's vt_full sees) is free too.
//  - The peer's copies of page j + 2 reach this CTA's vt_full(v) only after its warpgroup 1 - rank released page j,
//    so after phase j completed; they may come before this CTA's expect_tx (the tx-count goes below zero while
//    arrivals are pending: the phase cannot complete before them).
// Tail pages: the copy waits until the transposers zeroed the half's past-the-end keys (one 16 KB copy after a
// barrier of the transpose threads), so the peer receives zeros.
// Start / end: a cluster barrier after the barriers' init (a remote arrive or a copy needs the peer's barriers) and
// one before exit (nothing may land in an exited CTA); both CTAs walk the same part, so both reach it.
#include <cstdint>

#include "ops/cuda/sm90/decode/cluster.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8/config_ws.h"
#include "ops/cuda/sm90/decode_fp8/transpose_ws.cuh"

namespace mla::sm90::decode_fp8 {

constexpr int kVtPairChunkBytes = 32 * 64;      // one chunk pair in the halves layout: 32 rows of 64 bytes
constexpr int kPeerFreeArrivals = 4;            // one per warp of the peer's reading warpgroup
// Knock-out bit 8192 (kernel_ws.cuh MLA_FP8_WS_KO, session 71): each chunk pair's copy moves 16 bytes and a tail page's
// 128, not 2 KB / 16 KB (wrong results): the twin's timing without the DSMEM bytes of its hand-off.
constexpr bool kKoPairCopyBytes = (MLA_FP8_WS_KO & 8192) != 0;
constexpr uint32_t kPairChunkCopyBytes = kKoPairCopyBytes ? 16 : kVtPairChunkBytes;
constexpr uint32_t kPairPageCopyBytes = kKoPairCopyBytes ? 8 * 16 : kVtHalfBytes;  // a page's, from the peer (expect_tx)
// MLA_FP8_WS_PAIR_SPLIT=2 (session 71): the hand-off by st.async (each lane re-reads 64 bytes of the chunk pair its
// warp stored and stores them into the peer with complete_tx) instead of the copy engine's bulk copies, which session
// 71 found to cost the twin ~60 % even at 16 bytes a copy (knock-out 8192): a latency, not the bytes. The consumers
// then fence the generic-proxy stores into the async proxy after their vt_full wait.
constexpr bool kPairStAsync = MLA_FP8_WS_PAIR_SPLIT == 2;
static_assert(!kPairStAsync || !kKoPairCopyBytes, "knock-out 8192 is a bound of the bulk-copy form");

// Stateless: every address is taken where it is used (the transposers run in 56 registers, the consumers in 224 with
// none to spare: the peer's addresses held in registers made ptxas spill the part cursor, 44-52 bytes).
struct VtPair {
  // This CTA's rank in the cluster: it transposes and sends V^T half rank().
  __device__ static uint32_t rank() { return decode::cluster_ctarank(); }
  __device__ static uint32_t peer(uint32_t local) { return decode::map_shared_to_rank(local, rank() ^ 1u); }

  // Transposer: chunk pair cp (this warp's stores, done) of the stage at s_vt (its vt_full: vt_full) into the peer's
  // same stage. Every lane fences its stores into the async proxy, then lane 0 issues.
  __device__ static void push_chunk_pair(uint32_t s_vt, uint32_t vt_full, int cp, int lane) {
    if constexpr (kPairStAsync) {
      __syncwarp();  // the warp's stmatrix rows are in shared memory (bar.warp.sync orders memory among its lanes)
      push_units(vt_chunk_pair_halves(s_vt, cp) + 64 * lane, 4, 1, vt_full);
    } else {
      decode::fence_proxy_async();
      __syncwarp();
      if (lane == 0) {
        const uint32_t src = vt_chunk_pair_halves(s_vt, cp);
        decode::bulk_copy_to_cluster(peer(src), src, kPairChunkCopyBytes, peer(vt_full));
      }
    }
  }
  // st.async form: `n` 16-byte units from src, `stride` units apart, each into the peer's same address.
  __device__ static void push_units(uint32_t src, int n, int stride, uint32_t vt_full) {
    const uint32_t dst = peer(src), bar = peer(vt_full);
#pragma unroll 4
    for (int u = 0; u < n; ++u) {
      uint32_t v[4];
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                   : "r"(src + 16 * stride * u));
      decode::st_async_v4(dst + 16 * stride * u, v, bar);
    }
  }
  // Transposer, a tail page: zero this CTA's half past valid_keys, then send the whole half (tw: 0 .. n_threads - 1,
  // the transpose threads, synced on kBarTranspose before the zeroing and again before the copy).
  __device__ static void zero_tail_and_push(uint32_t s_vt, uint32_t vt_full, int valid_keys, int tw, int n_threads) {
    const uint32_t half = s_vt + rank() * kVtHalfBytes;
    decode::named_sync(kBarTranspose, n_threads);  // the other warps' stmatrix are done
    zero_vt_tail<true>(half, valid_keys, tw, n_threads);
    if constexpr (kPairStAsync) {
      decode::named_sync(kBarTranspose, n_threads);
      // 1024 units of 16 bytes over the n_threads (96: 10 or 11 each)
      push_units(half + 16 * tw, (kVtHalfBytes / 16 - tw + n_threads - 1) / n_threads, n_threads, vt_full);
    } else {
      decode::fence_proxy_async();
      decode::named_sync(kBarTranspose, n_threads);
      if (tw == 0) decode::bulk_copy_to_cluster(peer(half), half, kPairPageCopyBytes, peer(vt_full));
    }
  }
  // Consumer warpgroup wg, every lane of a warp, after its P.V of a stage completed (peer_free_local: this CTA's
  // peer_free barrier of that stage): the warpgroup that reads the peer's half tells the peer it may write the stage
  // again.
  __device__ static void release(uint32_t peer_free_local, int wg, int lane) {
    if (static_cast<uint32_t>(wg) == (rank() ^ 1u)) {
      __syncwarp();
      if (lane == 0) decode::mbar_arrive_cluster(peer(peer_free_local));
    }
  }
};

}  // namespace mla::sm90::decode_fp8
