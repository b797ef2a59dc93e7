// main() of every GPU test binary: registers the registry's cases as GoogleTest tests, then runs all.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "common/random.h"
#include "harness/registry.h"

namespace mla::test {

std::vector<GpuCase>& gpu_cases() {
  static std::vector<GpuCase> cases;
  return cases;
}

bool small_cases() {
  const char* s = std::getenv("MLA_SMALL_CASES");
  return s != nullptr && s[0] == '1';
}

namespace {
class RegistryTest : public ::testing::Test {
 public:
  explicit RegistryTest(const GpuCase* c) : c_(c) {}
  void TestBody() override {
    CaseReport rep;
    const Status s = c_->run(&rep);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_FALSE(rep.metrics.empty()) << "case checked nothing";
    bool ok = true;
    for (const CaseMetric& m : rep.metrics) {
      const Tolerance& tol = m.tol != nullptr ? *m.tol : c_->tol;
      const bool pass = within(m.stats, tol);
      ok &= pass;
      std::printf("[case] %s %s %s: %s  tol rel_l2<=%.1e max_abs<=%.1e  %s\n", c_->op.c_str(), c_->name.c_str(),
                  m.what.c_str(), m.stats.str().c_str(), tol.rel_l2, tol.max_abs, pass ? "ok" : "FAIL");
      EXPECT_TRUE(pass) << m.what << ": " << m.stats.str() << " (tolerance: " << tol.why << ")";
    }
    if (!rep.note.empty()) std::printf("[note] %s %s: %s\n", c_->op.c_str(), c_->name.c_str(), rep.note.c_str());
    (void)ok;
  }

 private:
  const GpuCase* c_;
};
}  // namespace

}  // namespace mla::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int n = 0;
  // --gtest_list_tests needs no device, so a CPU-only machine can list the cases it built (shapes that consult the
  // SM count for a twin then see device_sm_count()'s H100 / H200 default of 132).
  const bool listing = ::testing::GTEST_FLAG(list_tests);
  if (!listing && (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)) {
    std::fprintf(stderr, "no CUDA device visible: GPU tests need an sm_90 GPU\n");
    return 2;
  }
  std::printf("MLA_TEST_SEED=%llu\n", static_cast<unsigned long long>(mla::test::run_seed()));
  for (const auto& c : mla::test::gpu_cases()) {
    const auto* cp = &c;
    ::testing::RegisterTest(c.op.c_str(), c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [cp]() -> ::testing::Test* { return new mla::test::RegistryTest(cp); });
  }
  return RUN_ALL_TESTS();
}
