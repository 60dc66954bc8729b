/* fusebox — the shared strict decoder of a JSON string's body: every status,
 * where each mistake is placed, and the text it decodes. */
#include "policy/util.h"
#include "tests/lib/test-util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

typedef struct
{
  const char *body; /* after the opening quote */
  bool check_utf8;
  FbJsonStringStatus status;
  int at;           /* offset of *ret_at */
  const char *text; /* decoded, on success */
} Case;

static const Case cases[] = {
  { "abc\"", true, FB_JSON_STRING_OK, 4, "abc" },
  { "\"rest", true, FB_JSON_STRING_OK, 1, "" },
  { "a\\n\\t\\\"\\\\\\/\\b\\f\\r\"", true, FB_JSON_STRING_OK, 18, "a\n\t\"\\/\b\f\r" },
  { "\\u00e9\\u20AC\"", true, FB_JSON_STRING_OK, 13, "\xc3\xa9\xe2\x82\xac" },
  { "\\ud83d\\ude00\"", true, FB_JSON_STRING_OK, 13, "\xf0\x9f\x98\x80" },
  { "caf\xc3\xa9\"", true, FB_JSON_STRING_OK, 6, "caf\xc3\xa9" },
  { "\xff\"", false, FB_JSON_STRING_OK, 2, "\xff" },
  { "abc", true, FB_JSON_STRING_UNTERMINATED, 3, NULL },
  { "abc\\", true, FB_JSON_STRING_UNTERMINATED, 4, NULL },
  { "\\u00e9", true, FB_JSON_STRING_UNTERMINATED, 6, NULL },
  { "ab\x01\"", true, FB_JSON_STRING_CONTROL, 2, NULL },
  { "ab\n\"", false, FB_JSON_STRING_CONTROL, 2, NULL },
  { "\\u12g4\"", true, FB_JSON_STRING_BAD_HEX, 4, NULL },
  { "\\u12", true, FB_JSON_STRING_BAD_HEX, 4, NULL },
  { "\\ud83d\"", true, FB_JSON_STRING_UNPAIRED_HIGH, 6, NULL },
  { "\\ud83d\\u0041\"", true, FB_JSON_STRING_UNPAIRED_HIGH, 12, NULL },
  { "\\ud83d\\uzz\"", true, FB_JSON_STRING_BAD_HEX, 8, NULL },
  { "\\ude00\"", true, FB_JSON_STRING_LONE_LOW, 6, NULL },
  { "ab\\u0000\"", true, FB_JSON_STRING_NUL, 2, NULL },
  { "ab\\x\"", true, FB_JSON_STRING_UNKNOWN_ESCAPE, 2, NULL },
  { "ab\\'\"", true, FB_JSON_STRING_UNKNOWN_ESCAPE, 2, NULL },
  { "ab\xff\"", true, FB_JSON_STRING_BAD_UTF8, 2, NULL },
  { "ab\xc3\"", true, FB_JSON_STRING_BAD_UTF8, 2, NULL },
  { "ab\xed\xa0\x80\"", true, FB_JSON_STRING_BAD_UTF8, 2, NULL },
};

static void
test_cases (void **state)
{
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const Case *c = &cases[i];
      size_t len = strlen (c->body);
      g_autoptr (GString) out = g_string_new (NULL);
      const char *at = NULL;
      FbJsonStringStatus st = fb_json_string_decode (c->body, c->body + len, c->check_utf8, out, &at);

      if (st != c->status || at - c->body != c->at)
        fail_msg ("case %zu (%s): status %d at %td, expected %d at %d", i, c->body, st, at - c->body, c->status, c->at);
      if (c->text != NULL)
        assert_string_equal (out->str, c->text);

      /* Without an output: the same status and place. */
      {
        const char *at2 = NULL;

        assert_int_equal (fb_json_string_decode (c->body, c->body + len, c->check_utf8, NULL, &at2), st);
        assert_ptr_equal (at2, at);
      }
    }
}

/* The end bounds the scan: a closing quote past it is not seen. */
static void
test_end_bounds (void **state)
{
  const char *text = "abc\"";
  const char *at;

  assert_int_equal (fb_json_string_decode (text, text + 3, true, NULL, &at), FB_JSON_STRING_UNTERMINATED);
  assert_ptr_equal (at, text + 3);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_cases), cmocka_unit_test (test_end_bounds))
