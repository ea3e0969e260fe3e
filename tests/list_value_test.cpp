#include <gtest/gtest.h>

#include "common/error.h"
#include "common/text.h"
#include "orchestrator/list_value.h"
#include "tests/expect_throw.h"

using fanout::parse_list_value;
using fanout::UserError;
using fanout::parse_int;
using V = std::vector<std::string>;

TEST(ListValue, ScalarIsAOneElementList) { EXPECT_EQ(parse_list_value("4", "--nodes"), V{"4"}); }

TEST(ListValue, SmartSimScalingListForm) {
  EXPECT_EQ(parse_list_value("[4,8,16]", "--nodes"), (V{"4", "8", "16"}));
  EXPECT_EQ(parse_list_value(" [ 4 , 8 ] ", "--nodes"), (V{"4", "8"}));
  EXPECT_EQ(parse_list_value("['cpp','fortran']", "--languages"), (V{"cpp", "fortran"}));
  EXPECT_EQ(parse_list_value("[\"a,b\",c]", "--x"), (V{"a,b", "c"}));
  EXPECT_EQ(parse_list_value("[7]", "--x"), V{"7"});
}

TEST(ListValue, MalformedListsNameTheFlag) {
  for (const char* bad : {"[1,2", "1,2]", "[]", "[1,,2]", "[[1],2]", "['a,b]", "[1,2]]", ""}) {
    try {
      parse_list_value(bad, "--nodes");
      ADD_FAILURE() << "accepted malformed '" << bad << "'";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("--nodes"), std::string::npos) << e.what();
    }
  }
}

TEST(ListValue, MissingBracketSaysWhich) {
  try {
    parse_list_value("[1,2", "--nodes");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("missing closing ']'"), std::string::npos) << e.what();
  }
}

TEST(ListValue, FormatRoundTrips) {
  V v{"1", "a b", "x"};
  EXPECT_EQ(parse_list_value(fanout::format_list_value(v), "t"), v);
}

// Values that the old formatter wrote bare and that then read back different (found by tests/fuzz).
TEST(ListValue, FormatRoundTripsWhatParsingCanReturn) {
  for (V v : {V{" - "}, V{""}, V{"c\x01\n", "for"}, V{"[a"}, V{"\"x", "y"}, V{"a'b\"c"}, V{"a,b"}, V{"x y", "", "'q'"}})
    EXPECT_EQ(parse_list_value(fanout::format_list_value(v), "t"), v) << fanout::format_list_value(v);
  EXPECT_EQ(fanout::format_list_value({"4", "8"}), "[4,8]");
  // No quoting carries both kinds in a list.
  EXPECT_THROW_WITH(fanout::format_list_value({"a'b\"c", "d"}), UserError,
                    "cannot write 'a'b\"c' as a list element (it mixes both kinds of quote)");
}

TEST(ParseInt, SignsAndGarbage) {
  EXPECT_EQ(parse_int("+5"), 5);
  EXPECT_EQ(parse_int("-5"), -5);
  EXPECT_FALSE(parse_int("+-5"));  // was accepted as -5
  EXPECT_FALSE(parse_int("+"));
  EXPECT_FALSE(parse_int("5x"));
  EXPECT_FALSE(parse_int(""));
}
