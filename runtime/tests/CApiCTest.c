/* CApiCTest.c - Proves loomrt.h compiles as C99 and its functions link. */

#include "loomrt/loomrt.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

int main(void) {
  char buf[256];
  loomrt_status status;

  check(loomrt_version()[0] != '\0', "version is not empty");
  check(strcmp(loomrt_status_string(LOOMRT_ERROR_IO), "LOOMRT_ERROR_IO") == 0,
        "status string of LOOMRT_ERROR_IO");

  status = loomrt_safetensors_inspect("/nonexistent/dir/x.safetensors", buf,
                                      sizeof(buf));
  check(status == LOOMRT_ERROR_IO, "missing file gives LOOMRT_ERROR_IO");
  check(strstr(loomrt_last_error(), "x.safetensors") != NULL,
        "last error names the file");

  status = loomrt_safetensors_inspect(NULL, buf, sizeof(buf));
  check(status == LOOMRT_ERROR_INVALID_ARGUMENT, "null path is rejected");

  return failures != 0;
}
