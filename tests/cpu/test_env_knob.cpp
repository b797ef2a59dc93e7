// Diagnostic env knobs: unset/empty -> default, a listed value -> its index, anything else -> an error that names
// the knob and the allowed values (a typo or a removed variant name must not silently run the default).
#include <gtest/gtest.h>

#include <cstdlib>

#include "mla/core/env_knob.h"

namespace mla {
namespace {

constexpr const char* kName = "MLA_TEST_ENV_KNOB";

TEST(EnvKnob, UnsetAndEmptyMeanDefault) {
  unsetenv(kName);
  EnvKnob k = read_env_knob(kName, {"a", "b"});
  EXPECT_TRUE(k.status.is_ok());
  EXPECT_EQ(k.index, -1);
  setenv(kName, "", 1);
  k = read_env_knob(kName, {"a", "b"});
  EXPECT_TRUE(k.status.is_ok());
  EXPECT_EQ(k.index, -1);
  unsetenv(kName);
}

TEST(EnvKnob, ListedValuesGiveTheirIndex) {
  setenv(kName, "b", 1);
  const EnvKnob k = read_env_knob(kName, {"a", "b", "c"});
  EXPECT_TRUE(k.status.is_ok());
  EXPECT_EQ(k.index, 1);
  unsetenv(kName);
}

TEST(EnvKnob, UnknownValueIsAnErrorNamingKnobAndChoices) {
  setenv(kName, "ws_overlap", 1);  // e.g. a variant that was deleted
  const EnvKnob k = read_env_knob(kName, {"ws_pvfirst_slabs", "mma_sync"});
  EXPECT_FALSE(k.status.is_ok());
  EXPECT_EQ(k.index, -1);
  const std::string m = k.status.to_string();
  EXPECT_NE(m.find(kName), std::string::npos) << m;
  EXPECT_NE(m.find("ws_overlap"), std::string::npos) << m;
  EXPECT_NE(m.find("ws_pvfirst_slabs|mma_sync"), std::string::npos) << m;
  unsetenv(kName);
}

}  // namespace
}  // namespace mla
