/* CApiCTest.c - Proves loomrt.h compiles as C99 and its functions link, and
 * runs an artifact (gemm + kernel + copy) through the C API; the training
 * calls link and report errors from C too. */

#define _POSIX_C_SOURCE 200809L

#include "loomrt/loomrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s (last error: %s)\n", what, loomrt_last_error());
    ++failures;
  }
}

/* y = relu(a . b + bias) [2, 2]; flat = copy of y [4]. */
static const char kPlan[] =
    "{\"format\": \"loom-plan\", \"version\": 1, \"target\": \"cpu\",\n"
    " \"kernel_abi\": 1, \"kernels\": \"kernels.so\", \"params\": null,\n"
    " \"entries\": [{\"name\": \"main\", \"arena_bytes\": 384,\n"
    "  \"buffers\": [\n"
    "   {\"offset\": 0, \"dtype\": \"f32\", \"shape\": [2, 3]},\n"
    "   {\"offset\": 64, \"dtype\": \"f32\", \"shape\": [3, 2]},\n"
    "   {\"offset\": 128, \"dtype\": \"f32\", \"shape\": [2, 2]},\n"
    "   {\"offset\": 192, \"dtype\": \"f32\", \"shape\": [2, 2]},\n"
    "   {\"offset\": 256, \"dtype\": \"f32\", \"shape\": [2, 2]},\n"
    "   {\"offset\": 320, \"dtype\": \"f32\", \"shape\": [4]}],\n"
    "  \"inputs\": [{\"name\": \"a\", \"kind\": \"input\", \"buffer\": 0},\n"
    "              {\"name\": \"b\", \"kind\": \"input\", \"buffer\": 1},\n"
    "              {\"name\": \"bias\", \"kind\": \"input\", \"buffer\": 3}],\n"
    "  \"outputs\": [{\"name\": \"y\", \"kind\": \"output\", \"buffer\": 4},\n"
    "               {\"name\": \"flat\", \"kind\": \"output\", \"buffer\": "
    "5}],\n"
    "  \"steps\": [\n"
    "   {\"kind\": \"gemm\", \"a\": 0, \"b\": 1, \"c\": 2, \"batch\": 1,\n"
    "    \"m\": 2, \"n\": 2, \"k\": 3, \"trans_a\": false, \"trans_b\": "
    "false,\n"
    "    \"stride_a\": 0, \"stride_b\": 0, \"stride_c\": 0},\n"
    "   {\"kind\": \"kernel\", \"name\": \"add_relu4\", \"buffers\": [2, 3, "
    "4]},\n"
    "   {\"kind\": \"copy\", \"src\": 4, \"dst\": 5}]}]}\n";

static void testArtifact(void) {
  char dir[] = "/tmp/loomrt-ctest-XXXXXX";
  char path[256];
  FILE *f;
  loomrt_artifact *artifact = NULL;
  loomrt_status status;
  size_t count = 0, i;
  const char *name = NULL;
  loomrt_tensor info, inputs[3], outputs[2];
  float a[6] = {1, -2, 3, 0.5f, 4, -1}, b[6] = {2, 1, 0, -1, 1, 3};
  float bias[4] = {0.5f, -20, 1, 2}, y[4], flat[4], expected[4];
  int64_t shapeA[2] = {2, 3}, shapeB[2] = {3, 2}, shapeBias[2] = {2, 2};
  int r, c, k;

  if (!mkdtemp(dir)) {
    check(0, "mkdtemp");
    return;
  }
  snprintf(path, sizeof path, "%s/plan.json", dir);
  f = fopen(path, "w");
  check(f != NULL, "write plan.json");
  if (!f)
    return;
  fputs(kPlan, f);
  fclose(f);
  snprintf(path, sizeof path, "%s/kernels.so", dir);
  check(symlink(LOOMRT_TEST_KERNELS_PATH, path) == 0, "link kernels.so");

  status = loomrt_artifact_load(dir, &artifact);
  check(status == LOOMRT_OK && artifact != NULL, "artifact loads");
  if (!artifact)
    goto cleanup;
  check(loomrt_artifact_num_entries(artifact, &count) == LOOMRT_OK &&
            count == 1,
        "one entry");
  check(loomrt_artifact_entry_name(artifact, 0, &name) == LOOMRT_OK &&
            strcmp(name, "main") == 0,
        "entry name");
  check(loomrt_artifact_num_inputs(artifact, "main", &count) == LOOMRT_OK &&
            count == 3,
        "three inputs");
  check(loomrt_artifact_input_info(artifact, "main", 2, &info) == LOOMRT_OK &&
            strcmp(info.name, "bias") == 0 && info.dtype == LOOMRT_DTYPE_F32 &&
            info.rank == 2 && info.shape[1] == 2 && info.nbytes == 16,
        "input info");
  check(loomrt_artifact_output_info(artifact, "main", 1, &info) == LOOMRT_OK &&
            strcmp(info.name, "flat") == 0 && info.rank == 1,
        "output info");
  check(loomrt_artifact_num_outputs(artifact, "nope", &count) ==
            LOOMRT_ERROR_INVALID_ARGUMENT,
        "unknown entry");

  inputs[0].name = "a";
  inputs[0].dtype = LOOMRT_DTYPE_F32;
  inputs[0].rank = 2;
  inputs[0].shape = shapeA;
  inputs[0].data = a;
  inputs[0].nbytes = sizeof a;
  inputs[1] = inputs[0];
  inputs[1].name = "b";
  inputs[1].shape = shapeB;
  inputs[1].data = b;
  inputs[2] = inputs[0];
  inputs[2].name = "bias";
  inputs[2].shape = shapeBias;
  inputs[2].data = bias;
  inputs[2].nbytes = sizeof bias;
  memset(outputs, 0, sizeof outputs);
  outputs[0].data = y;
  outputs[0].nbytes = sizeof y;
  outputs[1].data = flat;
  outputs[1].nbytes = sizeof flat;
  status = loomrt_artifact_run(artifact, "main", inputs, 3, outputs, 2);
  check(status == LOOMRT_OK, "run succeeds");
  for (r = 0; r < 2; ++r)
    for (c = 0; c < 2; ++c) {
      float acc = bias[r * 2 + c];
      for (k = 0; k < 3; ++k)
        acc += a[r * 3 + k] * b[k * 2 + c];
      expected[r * 2 + c] = acc > 0 ? acc : 0;
    }
  for (i = 0; i < 4; ++i) {
    check(y[i] == expected[i], "y matches a plain loop");
    check(flat[i] == expected[i], "flat matches a plain loop");
  }
  check(strcmp(outputs[1].name, "flat") == 0 && outputs[1].nbytes == 16,
        "outputs are described");

  /* A wrong shape names the input and both types. */
  inputs[0].shape = shapeB;
  status = loomrt_artifact_run(artifact, "main", inputs, 3, outputs, 2);
  check(status == LOOMRT_ERROR_INVALID_ARGUMENT, "wrong shape refused");
  check(strstr(loomrt_last_error(),
               "input 'a': expected f32 [2, 3], got f32 [3, 2]") != NULL,
        "wrong shape message");
  inputs[0].shape = shapeA;
  outputs[0].nbytes = 8;
  status = loomrt_artifact_run(artifact, "main", inputs, 3, outputs, 2);
  check(status == LOOMRT_ERROR_INVALID_ARGUMENT, "small output refused");

  /* The training calls, from C: this artifact has nothing to train, and
   * the trainer says what is missing (CApiTrainTest.cpp trains for real). */
  {
    loomrt_trainer *trainer = NULL;
    loomrt_binding_kind kind;
    check(loomrt_artifact_input_kind(artifact, "main", 2, &kind) ==
                  LOOMRT_OK &&
              kind == LOOMRT_BINDING_INPUT,
          "input kind");
    check(loomrt_train_create(artifact, &trainer) == LOOMRT_OK,
          "trainer created");
    check(loomrt_train_set_option(trainer, "steps", "2") == LOOMRT_OK,
          "steps set");
    check(loomrt_train_set_option(trainer, "stepz", "2") ==
              LOOMRT_ERROR_INVALID_ARGUMENT,
          "unknown option refused");
    check(loomrt_train_run(trainer) == LOOMRT_ERROR_INVALID_ARGUMENT &&
              strstr(loomrt_last_error(), "training needs") != NULL,
          "training without data refused");
    loomrt_train_free(trainer);
  }

cleanup:
  loomrt_artifact_free(artifact);
  snprintf(path, sizeof path, "%s/kernels.so", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/plan.json", dir);
  unlink(path);
  rmdir(dir);

  artifact = NULL;
  status = loomrt_artifact_load("/nonexistent/model.loom", &artifact);
  check(status == LOOMRT_ERROR_IO && artifact == NULL,
        "missing artifact gives LOOMRT_ERROR_IO");
  check(strstr(loomrt_last_error(), "plan.json") != NULL,
        "missing artifact names plan.json");
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

  testArtifact();
  return failures != 0;
}
