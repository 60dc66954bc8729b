/* fusebox — the check every string table (policy/util.h,
 * FB_DEFINE_STRING_TABLE) passes, shared by the tests of the vocabulary
 * tables (header only; include after cmocka.h). */
#pragma once

/* Every row of TABLE (N rows with a `name`) has a name of its own, which
 * PREFIX_to_string gives and PREFIX_from_string reads back to the row's
 * value; outside the table, "invalid" and false. */
#define assert_string_table(prefix, Type, table, n)                                                                    \
  do                                                                                                                   \
    {                                                                                                                  \
      Type back_;                                                                                                      \
                                                                                                                       \
      for (guint i_ = 0; i_ < (n); i_++)                                                                               \
        {                                                                                                              \
          const char *name_ = prefix##_to_string ((Type)i_);                                                           \
                                                                                                                       \
          assert_non_null ((table)[i_].name);                                                                          \
          assert_string_equal (name_, (table)[i_].name);                                                               \
          assert_true (prefix##_from_string (name_, &back_));                                                          \
          assert_int_equal (back_, i_);                                                                                \
          for (guint j_ = 0; j_ < i_; j_++)                                                                            \
            assert_string_not_equal (name_, (table)[j_].name);                                                         \
        }                                                                                                              \
      assert_string_equal (prefix##_to_string ((Type)(n)), "invalid");                                                 \
      assert_false (prefix##_from_string ("invalid", NULL));                                                           \
      assert_false (prefix##_from_string (NULL, NULL));                                                                \
    }                                                                                                                  \
  while (0)
