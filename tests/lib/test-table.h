/* fusebox — the row of a table-driven test that maps one string to
 * another: what goes in and what the code under test must answer.  Each
 * table says beside itself what `out` is there (the output, a message's
 * start, or NULL for a refusal). */
#pragma once

typedef struct
{
  const char *in;
  const char *out;
} TestInOut;
