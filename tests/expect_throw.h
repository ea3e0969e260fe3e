// EXPECT_THROW_WITH: the statement throws `exception` (or a subclass) whose what() contains `text`. A plain
// EXPECT_THROW passes on any throw of that type, e.g. a failed connect where a refusal was meant.
#pragma once
#include <gtest/gtest.h>

#include <string>

#define EXPECT_THROW_WITH(statement, exception, text)                                                       \
  do {                                                                                                      \
    bool fanout_thrown_ = false;                                                                            \
    try {                                                                                                   \
      statement;                                                                                            \
    } catch (const exception& fanout_e_) {                                                                  \
      fanout_thrown_ = true;                                                                                \
      EXPECT_NE(std::string(fanout_e_.what()).find(text), std::string::npos)                                \
          << #statement " threw \"" << fanout_e_.what() << "\", without \"" << (text) << "\"";              \
    }                                                                                                       \
    EXPECT_TRUE(fanout_thrown_) << #statement " did not throw " #exception;                                 \
  } while (0)
