/* The C client's round trip (language_clients_test): for every dtype and the shapes [7], [3,4], [2,3,5], puts a
 * tensor of element i = i % 100 under PREFIX_<dtype>_<ndims>, unpacks it back and compares. The test reads the
 * same keys from C++ afterwards. Prints "ok N" after N tensors; exit 1 on the first difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fanout_tensor_client.h"

static void fill(void* buf, size_t n, fanout_tc_dtype d) {
  for (size_t i = 0; i < n; ++i) {
    const int v = (int)(i % 100);
    switch (d) {
      case FANOUT_TC_FLOAT: ((float*)buf)[i] = (float)v; break;
      case FANOUT_TC_DOUBLE: ((double*)buf)[i] = v; break;
      case FANOUT_TC_INT8: ((int8_t*)buf)[i] = (int8_t)v; break;
      case FANOUT_TC_INT16: ((int16_t*)buf)[i] = (int16_t)v; break;
      case FANOUT_TC_INT32: ((int32_t*)buf)[i] = v; break;
      case FANOUT_TC_INT64: ((int64_t*)buf)[i] = v; break;
      case FANOUT_TC_UINT8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
      case FANOUT_TC_UINT16: ((uint16_t*)buf)[i] = (uint16_t)v; break;
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  fanout_tc* c = fanout_tc_connect_env();
  if (!c) {
    fprintf(stderr, "connect: %s\n", fanout_tc_error(NULL));
    return 1;
  }
  const size_t shapes[3][3] = {{7}, {3, 4}, {2, 3, 5}};
  int count = 0;
  for (int d = FANOUT_TC_FLOAT; d <= FANOUT_TC_UINT16; ++d) {
    for (size_t s = 0; s < 3; ++s) {
      const size_t n_dims = s + 1;
      size_t n = 1;
      for (size_t k = 0; k < n_dims; ++k) n *= shapes[s][k];
      const size_t bytes = n * fanout_tc_dtype_size((fanout_tc_dtype)d);
      void* out = malloc(bytes);
      void* back = calloc(1, bytes);
      fill(out, n, (fanout_tc_dtype)d);
      char key[128];
      snprintf(key, sizeof key, "%s_%d_%zu", argv[1], d, n_dims);
      if (fanout_tc_put_tensor(c, key, out, shapes[s], n_dims, (fanout_tc_dtype)d) != 0 ||
          fanout_tc_unpack_tensor(c, key, back, shapes[s], n_dims, (fanout_tc_dtype)d) != 0) {
        fprintf(stderr, "%s: %s\n", key, fanout_tc_error(c));
        return 1;
      }
      if (memcmp(out, back, bytes) != 0) {
        fprintf(stderr, "%s: unpacked bytes differ\n", key);
        return 1;
      }
      free(out);
      free(back);
      ++count;
    }
  }
  /* The wrong type is refused with a reason, not read into the buffer. */
  double wrong[7];
  char key[128];
  snprintf(key, sizeof key, "%s_%d_1", argv[1], FANOUT_TC_FLOAT);
  const size_t dims[1] = {7};
  if (fanout_tc_unpack_tensor(c, key, wrong, dims, 1, FANOUT_TC_DOUBLE) == 0 || !*fanout_tc_error(c)) {
    fprintf(stderr, "a FLOAT tensor was unpacked as DOUBLE\n");
    return 1;
  }
  /* A NULL buffer is an error, not a success that wrote nothing (issue 41 item 18). */
  if (fanout_tc_unpack_tensor(c, key, NULL, dims, 1, FANOUT_TC_FLOAT) == 0 || !strstr(fanout_tc_error(c), "out is NULL")) {
    fprintf(stderr, "unpack into NULL returned success\n");
    return 1;
  }
  if (fanout_tc_put_tensor(c, key, NULL, dims, 1, FANOUT_TC_FLOAT) == 0 || !strstr(fanout_tc_error(c), "data is NULL")) {
    fprintf(stderr, "put from NULL returned success\n");
    return 1;
  }
  printf("ok %d\n", count);
  fanout_tc_free(c);
  return 0;
}
