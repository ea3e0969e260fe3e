/* fanout_tensor_client.h: the tensor client's C API (stable; version FANOUT_TC_API_VERSION).
 *
 * A SmartRedis-like client for a Redis database that runs fanout's RedisAI-compatible module (or RedisAI 1.2):
 * tensors (AI.TENSORSET / AI.TENSORGET ... META BLOB), datasets, aggregation lists, Redis Cluster routing.
 * C, Fortran (module fanout_tensor_client, ISO_C_BINDING) and Python (package fanout_tensor_client) clients
 * are built on these functions. Link with `pkg-config --cflags --libs fanout-tensor-client`.
 *
 * Conventions:
 * - Functions returning int return 0 on success and -1 on failure; fanout_tc_error(client) then tells why.
 * - Shapes are given in C (row-major) order: dims[0] is the slowest-varying dimension. A tensor's byte size is
 *   the product of its dims times its dtype's size; buffers must hold exactly that many bytes.
 * - A client is not thread-safe: use one per thread. Calls block; timeouts come from SR_CONN_TIMEOUT and
 *   SR_CMD_TIMEOUT (milliseconds) or fanout_tc_connect's arguments.
 * - Additions keep the existing functions and enum values unchanged; FANOUT_TC_API_VERSION grows with them.
 */
#ifndef FANOUT_TENSOR_CLIENT_H
#define FANOUT_TENSOR_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FANOUT_TC_API_VERSION 1

typedef struct fanout_tc fanout_tc; /* one client: its connections, routing table and last error */

/* RedisAI's tensor types. The values are part of the API (the Fortran and Python bindings use them). */
typedef enum {
  FANOUT_TC_FLOAT = 1, /* 32-bit IEEE */
  FANOUT_TC_DOUBLE = 2,
  FANOUT_TC_INT8 = 3,
  FANOUT_TC_INT16 = 4,
  FANOUT_TC_INT32 = 5,
  FANOUT_TC_INT64 = 6,
  FANOUT_TC_UINT8 = 7,
  FANOUT_TC_UINT16 = 8
} fanout_tc_dtype;

int fanout_tc_api_version(void);
size_t fanout_tc_dtype_size(fanout_tc_dtype dtype); /* 0 for a value outside the enum */

/* Connects as SmartRedis does, from the environment: SSDB (host:port[,host:port...] or unix:/path),
 * SR_DB_TYPE (Clustered|Standalone), SR_DB_PASSWORD, SR_CONN_TIMEOUT, SR_CMD_TIMEOUT.
 * NULL on failure: fanout_tc_error(NULL) then holds the reason (per thread). */
fanout_tc* fanout_tc_connect_env(void);
/* The same with explicit settings; addresses is comma-separated; password may be NULL; timeouts <= 0 keep
 * the defaults (5000 ms to connect, 30000 ms per command). */
fanout_tc* fanout_tc_connect(const char* addresses, int cluster, const char* password, int connect_timeout_ms,
                             int command_timeout_ms);
void fanout_tc_free(fanout_tc* client);

/* The last failure of this client ("" if none), or, with NULL, this thread's last failed connect. The text
 * stays valid until the client's next call. */
const char* fanout_tc_error(const fanout_tc* client);

int fanout_tc_put_tensor(fanout_tc* client, const char* key, const void* data, const size_t* dims, size_t n_dims,
                         fanout_tc_dtype dtype);
/* Reads key into out, which holds exactly dims x dtype; a tensor of another type or shape is an error. */
int fanout_tc_unpack_tensor(fanout_tc* client, const char* key, void* out, const size_t* dims, size_t n_dims,
                            fanout_tc_dtype dtype);

/* A dataset of n tensors of one type and shape, stored as SmartRedis stores datasets ("{name}.<tensor>"
 * tensors and a "{name}.meta" hash, one hash slot), in one round trip. */
int fanout_tc_put_dataset(fanout_tc* client, const char* name, size_t n, const char* const* tensor_names,
                          const void* const* data, const size_t* dims, size_t n_dims, fanout_tc_dtype dtype);

/* Aggregation lists (SmartRedis's append_to_list / poll_list_length / get_datasets_from_list). */
int fanout_tc_append_to_list(fanout_tc* client, const char* list, const char* dataset);
int fanout_tc_get_list_length(fanout_tc* client, const char* list, int64_t* length);
/* Polls until the list holds `length` datasets: *reached is 1 then, 0 after `tries` polls interval_ms apart. */
int fanout_tc_poll_list_length(fanout_tc* client, const char* list, int64_t length, int interval_ms, int tries,
                               int* reached);
/* Fetches every tensor of every dataset in the list, over `threads` connections of its own (SmartRedis's
 * SR_THREAD_COUNT); *bytes gets the tensor bytes fetched. */
int fanout_tc_get_datasets_from_list(fanout_tc* client, const char* list, int threads, uint64_t* bytes);
/* Opens those connections now (a consumer does before it times anything; otherwise the first fetch opens them). */
int fanout_tc_connect_fetchers(fanout_tc* client, int threads);
int fanout_tc_delete_list(fanout_tc* client, const char* list);

/* CLOCK_MONOTONIC in nanoseconds: the clock fanout's ranks time with, so that every language's samples share it. */
int64_t fanout_tc_monotonic_ns(void);

#ifdef __cplusplus
}
#endif
#endif /* FANOUT_TENSOR_CLIENT_H */
