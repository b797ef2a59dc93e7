#pragma once
// Thread-block-cluster primitives (sm_90): the rank of this CTA, addresses in a peer CTA's shared memory
// (distributed shared memory), the cluster barrier, arrivals on a peer's mbarrier and bulk copies into a peer's
// shared memory. Users: the fp8 64-row kernel's split V^T (decode_fp8/vt_pair_ws.cuh), whose head-tile pair runs as
// a (1, 2, 1) cluster (launch_kernel.cuh).
#include <cstdint>

namespace mla::sm90::decode {

// Both pure (not volatile): the compiler may recompute them where it would otherwise hold them in a register.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// The shared::cluster address of this CTA's shared-memory address `addr` in the cluster's CTA `rank`: the same
// offset in the peer's window (windows are contiguous, so offsets may be added to the result).
__device__ __forceinline__ uint32_t map_shared_to_rank(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

// Every thread of every CTA of the cluster arrives (release: this thread's earlier memory operations, remote
// arrivals included, are visible to the cluster) and waits for all of them (acquire). Not .aligned: callers reach it
// from diverged roles.
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// One arrival on an mbarrier of another CTA of the cluster (`cluster_bar` from map_shared_to_rank), ordering this
// thread's earlier memory operations before it at cluster scope.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}

// A wait on a local mbarrier whose arrivals come from other CTAs (acquire at cluster scope: their earlier memory
// operations, the reads of a shared buffer this thread will overwrite, are ordered before what follows).
__device__ __forceinline__ bool mbar_try_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait_cluster(bar, parity)) {
  }
}

// Bulk copy of `bytes` (a multiple of 16, 16-byte aligned both ends) from this CTA's shared memory into another
// CTA's (`dst_cluster`), completing `bytes` transactions on the destination CTA's mbarrier `bar_cluster` (both from
// map_shared_to_rank). The source was written by generic stores: the writers fence.proxy.async first.
__device__ __forceinline__ void bulk_copy_to_cluster(uint32_t dst_cluster, uint32_t src, uint32_t bytes,
                                                     uint32_t bar_cluster) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          dst_cluster),
      "r"(src), "r"(bytes), "r"(bar_cluster)
      : "memory");
}

// 16 bytes from registers into another CTA's shared memory (`dst_cluster`), completing 16 transactions on that CTA's
// mbarrier `bar_cluster` (both from map_shared_to_rank): no copy engine between the registers and the peer.
__device__ __forceinline__ void st_async_v4(uint32_t dst_cluster, const uint32_t (&v)[4], uint32_t bar_cluster) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(dst_cluster),
      "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(bar_cluster)
      : "memory");
}

}  // namespace mla::sm90::decode
