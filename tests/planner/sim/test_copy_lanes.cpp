// The copy lanes' booking: where a transfer fits forward of a time, backward of a deadline,
// and where a lane booked solid drains.
#include "sim/copy_lanes.hpp"

#include <catch2/catch.hpp>

using delta::planner::CopyLane;

TEST_CASE("a transfer fits forward in the first gap long enough for it") {
  CopyLane lane;
  CHECK(lane.find_forward(5, 10) == 5);  // an empty lane: at once
  lane.reserve(10, 10);                  // busy [10, 20)
  lane.reserve(25, 5);                   // busy [25, 30)
  CHECK(lane.find_forward(0, 10) == 0);   // ends at 10, as the first booking starts
  CHECK(lane.find_forward(0, 11) == 30);  // neither [0, 10) nor [20, 25) holds 11
  CHECK(lane.find_forward(12, 5) == 20);  // inside a booking: after it
  CHECK(lane.find_forward(20, 5) == 20);  // [20, 25) exactly
  CHECK(lane.find_forward(21, 5) == 30);
  CHECK(lane.find_forward(40, 5) == 40);
}

TEST_CASE("a transfer fits backward in the last gap before its deadline") {
  CopyLane lane;
  lane.reserve(10, 10);  // busy [10, 20)
  lane.reserve(25, 5);   // busy [25, 30)
  CHECK(lane.find_backward(40, 5, 0) == 35);
  CHECK(lane.find_backward(30, 5, 0) == 20);   // [25, 30) taken: [20, 25)
  CHECK(lane.find_backward(30, 6, 0) == 4);    // nothing of 6 between 20 and 25: before 10
  CHECK(lane.find_backward(30, 6, 5) == -1);   // and not before 5
  CHECK(lane.find_backward(12, 3, 0) == 7);    // a deadline inside a booking
}

TEST_CASE("bookings at the same start merge, and a lane booked solid drains in order") {
  CopyLane lane;
  lane.reserve(0, 5);
  lane.reserve(0, 8);  // the longer of the two at one start
  CHECK(lane.find_forward(0, 1) == 8);
  lane.reserve(0, 2);  // a shorter one changes nothing
  CHECK(lane.find_forward(0, 1) == 8);
  lane.reserve(50, 0);  // empty: not booked
  CHECK(lane.find_forward(50, 1) == 50);

  CopyLane solid;
  for (int i = 0; i <= CopyLane::kMaxScan + 1; ++i) solid.reserve(i * 10, 10);  // [0, 660) back to back
  CHECK(solid.find_forward(0, 5) == CopyLane::kFar);  // too many bookings ahead to look past
  CHECK(solid.find_forward_or_queue(0, 5) == (CopyLane::kMaxScan + 2) * 10);  // queued behind the last
  CHECK(solid.find_forward_or_queue(1000, 5) == 1000);
}
