#include "support/Suggest.h"

#include <doctest/doctest.h>

#include <vector>

using mgc::closestName;
using mgc::didYouMean;

TEST_CASE("did-you-mean suggests only a likely typo") {
  std::vector<std::string> names{"weight_decay", "momentum", "lr", "eps"};
  CHECK(closestName("weight_decy", names) == "weight_decay");
  CHECK(closestName("momentun", names) == "momentum");
  // Short names allow one edit, medium ones two, long ones three.
  CHECK(closestName("ep", names) == "eps");
  CHECK(closestName("e", names) == "");
  CHECK(closestName("mmntum", names) == "momentum");
  CHECK(closestName("wd", names) == "");
  CHECK(closestName("wieght_dcay", names) == "weight_decay");
  CHECK(closestName("batch_size", names) == "");
  // A known name has nothing to suggest, even with a neighbour.
  CHECK(closestName("lr", std::vector<std::string>{"lr", "l2"}) == "");
  CHECK(didYouMean("momentun", names) == "; did you mean 'momentum'?");
  CHECK(didYouMean("xyz", names) == "");
}
