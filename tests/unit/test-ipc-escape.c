/* fusebox — what people are shown of hostile strings: the text escaper
 * (fb_text_append_safe_full: `log`, `report`, `runs`, `policy explain`,
 * error messages) and the JSON one (fb_json_append_string,
 * fb_json_to_string: the log itself, `report --json`, `runs --json`), which
 * share one list of characters a terminal must never get raw. */
#include "tests/unit/test-ipc-util.h"
#include "tests/lib/test-table.h"

static char *
safe (const char *s, FbTextFlags flags)
{
  GString *out = g_string_new (NULL);

  fb_text_append_safe_full (out, s, strlen (s), flags);
  return g_string_free (out, FALSE);
}

/* Nothing a terminal acts on or hides is left in OUT: no C0 byte, DEL, C1,
 * bidi or other format character, line or paragraph separator. */
static void
assert_printable (const char *out)
{
  for (const char *p = out; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char_validated (p, -1);

      if (c == (gunichar)-1 || c == (gunichar)-2)
        fail_msg ("invalid UTF-8 at byte %td of: %s", p - out, out);
      if (fb_unichar_is_unsafe (c))
        fail_msg ("raw U+%04X in: %s", c, out);
    }
}

static const TestInOut text_cases[] = {
  { "plain name.txt", "plain name.txt" },
  { "esc\x1b[31mred", "esc\\x1b[31mred" },
  { "bell\a nl\n tab\t cr\r del\x7f", "bell\\x07 nl\\n tab\\t cr\\r del\\x7f" },
  { "back\\slash", "back\\\\slash" },
  /* C1 CSI (U+009B) as a character, a lone 0x9b byte as a byte */
  { "csi\xc2\x9b"
    "31m",
    "csi\\u009b31m" },
  { "lone\x9b", "lone\\x9b" },
  /* bidi: RLO, PDF, LRI, PDI, LRM, RLM, ALM */
  { "a\xe2\x80\xae"
    "deny\xe2\x80\xac",
    "a\\u202edeny\\u202c" },
  { "\xe2\x81\xa6x\xe2\x81\xa9", "\\u2066x\\u2069" },
  { "m\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "m\\u200e\\u200f\\u061c" },
  /* zero width space, joiners, BOM; line and paragraph separators */
  { "z\xe2\x80\x8b\xe2\x80\x8c\xe2\x80\x8d\xef\xbb\xbf", "z\\u200b\\u200c\\u200d\\ufeff" },
  { "l\xe2\x80\xa8p\xe2\x80\xa9", "l\\u2028p\\u2029" },
  /* a no-break space passes for a space; a tag character lies beyond the BMP */
  { "nb\xc2\xa0sp", "nb\\u00a0sp" },
  { "tag\xf3\xa0\x80\x81", "tag\\U000e0001" },
  /* invalid UTF-8: each byte */
  { "bad\xff\xfe", "bad\\xff\\xfe" },
  { "over\xc0\xaf", "over\\xc0\\xaf" },
  /* blanks that could fake a column or a line: runs, and either end */
  { "a  b", "a\\x20\\x20b" },
  { " lead", "\\x20lead" },
  { "trail ", "trail\\x20" },
  { "one space", "one space" },
  /* the elision mark is never a name's own */
  { "dots\xe2\x80\xa6", "dots\\u2026" },
  /* printable non-ASCII stays */
  { "caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x98\x80", "caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x98\x80" },
};

static void
test_text_cases (void **state)
{
  for (guint i = 0; i < G_N_ELEMENTS (text_cases); i++)
    {
      g_autofree char *out = safe (text_cases[i].in, FB_TEXT_ELIDE);

      assert_string_equal (out, text_cases[i].out);
      assert_printable (out);
    }
}

/* Columns are what the terminal will use: alignment depends on it. */
static void
test_text_columns (void **state)
{
  GString *out = g_string_new (NULL);

  assert_int_equal (fb_text_append_safe (out, "ab", 2), 2);
  assert_int_equal (fb_text_append_safe (out, "\x1b", 1), 4);
  assert_int_equal (fb_text_append_safe (out, "\xe6\x97\xa5", 3), 2);
  assert_int_equal (fb_text_append_safe (out, "\xe2\x80\xae", 3), 6);
  assert_int_equal (fb_text_append_safe (out, "a  b", 4), 10);
  g_string_free (out, TRUE);
}

/* Over FB_TEXT_MAX_COLS: the start and the end stay, one U+2026 between. */
static void
test_text_elision (void **state)
{
  GString *in = g_string_new ("/work/");
  GString *out = g_string_new (NULL);
  gsize cols;

  for (int i = 0; i < 500; i++)
    g_string_append_c (in, 'a' + i % 26);
  g_string_append (in, "/END.txt");
  cols = fb_text_append_safe (out, in->str, in->len);
  assert_true (cols <= FB_TEXT_MAX_COLS);
  assert_int_equal (g_utf8_strlen (out->str, -1), cols);
  assert_true (g_str_has_prefix (out->str, "/work/abcdef"));
  assert_true (g_str_has_suffix (out->str, "/END.txt"));
  assert_non_null (strstr (out->str, "\xe2\x80\xa6"));
  assert_null (strstr (strstr (out->str, "\xe2\x80\xa6") + 3, "\xe2\x80\xa6"));

  /* 255 spaces (one maximal name): elided too, and never raw */
  g_string_truncate (out, 0);
  g_string_assign (in, "/work/");
  for (int i = 0; i < 255; i++)
    g_string_append_c (in, ' ');
  g_string_append (in, "x");
  cols = fb_text_append_safe (out, in->str, in->len);
  assert_true (cols <= FB_TEXT_MAX_COLS);
  assert_null (strstr (out->str, "  "));
  assert_true (g_str_has_suffix (out->str, "\\x20x"));

  /* an escape is never cut in half */
  g_string_truncate (out, 0);
  g_string_assign (in, "");
  for (int i = 0; i < 200; i++)
    g_string_append (in, "\x1b");
  fb_text_append_safe (out, in->str, in->len);
  {
    const char *mark = strstr (out->str, "\xe2\x80\xa6");
    assert_non_null (mark);
    assert_int_equal ((mark - out->str) % 4, 0);
    assert_int_equal (strlen (mark + 3) % 4, 0);
  }

  /* without FB_TEXT_ELIDE nothing is cut */
  g_string_truncate (out, 0);
  cols = fb_text_append_safe_full (out, in->str, in->len, FB_TEXT_PLAIN);
  assert_int_equal (cols, 800);
  g_string_free (in, TRUE);
  g_string_free (out, TRUE);
}

/* A string quoted in a message keeps its blanks, and nothing that could
 * end its line or drive the terminal. */
static void
test_text_inline (void **state)
{
  g_autofree char *out = safe (" /w/\x1b]0;x\a\xe2\x80\xae:\r\nfusebox:  mounted\t\xc2\x9b ", FB_TEXT_INLINE);
  g_autoptr (GString) in = g_string_new (NULL);
  g_autoptr (GString) long_out = g_string_new (NULL);

  assert_string_equal (out, " /w/\\x1b]0;x\\x07\\u202e:\\r\\nfusebox:  mounted\\t\\u009b ");
  /* elided only past FB_TEXT_INLINE_MAX_COLS */
  for (guint i = 0; i < FB_TEXT_INLINE_MAX_COLS; i++)
    g_string_append_c (in, 'a' + i % 26);
  assert_int_equal (fb_text_append_safe_full (long_out, in->str, in->len, FB_TEXT_INLINE | FB_TEXT_ELIDE),
                    FB_TEXT_INLINE_MAX_COLS);
  assert_string_equal (long_out->str, in->str);
  g_string_append_c (in, 'z');
  g_string_truncate (long_out, 0);
  assert_int_equal (fb_text_append_safe_full (long_out, in->str, in->len, FB_TEXT_INLINE | FB_TEXT_ELIDE),
                    FB_TEXT_INLINE_MAX_COLS);
  assert_non_null (strstr (long_out->str, "\xe2\x80\xa6"));
}

/* fb_text_printf: the format's own text and line breaks as they are, each
 * %s argument escaped, the other conversions as printf's. */
static void
test_text_printf (void **state)
{
  const char *hostile = "m\x1b[31m\r\nfusebox: mounted\xe2\x80\xae\xc2\x9b";
  g_autofree char *a = fb_text_printf ("mount: %s does not exist\nRun 'fusebox mount --help'.", hostile);
  g_autofree char *b = fb_text_printf (
    "%d %u %ld %" G_GUINT64_FORMAT " %" G_GSIZE_FORMAT " %x %o %c %.1f %g %% %5s|%-5s|%.2s|%*d", -1, 7u, -3L,
    G_GUINT64_CONSTANT (18446744073709551615), (gsize)42, 255u, 8u, 'q', 2.25, 0.5, "ab", "cd", "e\nfgh", 3, 9);
  g_autofree char *c = fb_text_printf ("%s and %s", (const char *)NULL, "\\");

  assert_string_equal (a, "mount: m\\x1b[31m\\r\\nfusebox: mounted\\u202e\\u009b does not exist\n"
                          "Run 'fusebox mount --help'.");
  assert_string_equal (b, "-1 7 -3 18446744073709551615 42 ff 10 q 2.2 0.5 %    ab|cd   |e\\n|  9");
  assert_string_equal (c, "(null) and \\\\");
}

static void
test_text_is_safe (void **state)
{
  assert_true (fb_text_is_safe ("{\"path\":\"/w/caf\xc3\xa9 a  b\\\\\"}", -1));
  assert_false (fb_text_is_safe ("x\x1b", -1));
  assert_false (fb_text_is_safe ("x\xc2\x9b", -1));
  assert_false (fb_text_is_safe ("x\xe2\x80\xae", -1));
  assert_false (fb_text_is_safe ("x\xe2\x80\xa8", -1));
  assert_false (fb_text_is_safe ("x\xff", -1));
  assert_false (fb_text_is_safe ("x\n", -1));
  assert_true (fb_text_is_safe ("x\n", 1));
}

/* The JSON side: the same characters \u-escaped, and the text parses back
 * to the exact string. */
static void
test_json_escapes (void **state)
{
  static const char *const names[] = {
    "esc\x1b[31m",     "csi\xc2\x9b",    "rlo\xe2\x80\xae", "lri\xe2\x81\xa6",     "zw\xe2\x80\x8b",
    "bom\xef\xbb\xbf", "ls\xe2\x80\xa8", "ps\xe2\x80\xa9",  "tag\xf3\xa0\x80\x81", "nl\n\"q\"\\",
  };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      GString *out = g_string_new (NULL);
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_autoptr (GError) error = NULL;

      assert_true (fb_json_append_string (out, names[i]));
      assert_printable (out->str);
      assert_true (json_parser_load_from_data (parser, out->str, -1, &error));
      assert_string_equal (json_node_get_string (json_parser_get_root (parser)), names[i]);
      g_string_free (out, TRUE);
    }
}

/* A whole document (report --json, runs --json): strings, member names,
 * numbers, nesting; parses back to the same tree. */
static void
test_json_document (void **state)
{
  const char *doc = "{\"a\\u009bb\":[1,-2,3.5,true,false,null,\"x\\u202ey\"],\"o\":{\"s\":\"\\u2028\"},"
                    "\"e\":[],\"f\":{},\"d\":2.0}";
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonParser) again = json_parser_new ();
  g_autofree char *compact = NULL;
  g_autofree char *pretty = NULL;
  JsonObject *o;

  assert_true (json_parser_load_from_data (parser, doc, -1, NULL));
  compact = fb_json_to_string (json_parser_get_root (parser), FALSE);
  pretty = fb_json_to_string (json_parser_get_root (parser), TRUE);
  assert_printable (compact);
  {
    /* the newlines are the format's */
    g_auto (GStrv) lines = g_strsplit (pretty, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++)
      assert_printable (lines[i]);
  }
  assert_string_equal (compact, "{\"a\\u009bb\":[1,-2,3.5,true,false,null,\"x\\u202ey\"],\"o\":{\"s\":\"\\u2028\"},"
                                "\"e\":[],\"f\":{},\"d\":2.0}");
  assert_true (g_str_has_prefix (pretty, "{\n  \"a\\u009bb\" : [\n    1,\n"));
  assert_true (json_parser_load_from_data (again, pretty, -1, NULL));
  o = json_node_get_object (json_parser_get_root (again));
  assert_string_equal (json_array_get_string_element (json_object_get_array_member (o, "a\xc2\x9b"
                                                                                       "b"),
                                                      6),
                       "x\xe2\x80\xae"
                       "y");
  assert_true (json_node_get_value_type (json_object_get_member (o, "d")) == G_TYPE_DOUBLE);
}

TEST_DEFINE_MAIN (NULL, NULL, cmocka_unit_test (test_text_cases), cmocka_unit_test (test_text_columns),
                  cmocka_unit_test (test_text_elision), cmocka_unit_test (test_text_inline),
                  cmocka_unit_test (test_text_printf), cmocka_unit_test (test_text_is_safe),
                  cmocka_unit_test (test_json_escapes), cmocka_unit_test (test_json_document))
