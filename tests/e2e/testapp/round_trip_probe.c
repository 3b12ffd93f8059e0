/* round-trip-probe: times GVirtuS-shaped exchanges with a backend (make bench-real, issue 56).
 *
 *   round-trip-probe HOST PORT [ROUNDS [SESSIONS]]   (defaults: 2000 rounds, 20 sessions)
 *   round-trip-probe config [ROUNDS [SESSIONS]]      (the backend of $GVIRTUS_CONFIG, else
 *                                                     $GVIRTUS_HOME/etc/properties.json)
 *
 * A GVirtuS frontend sends each CUDA call as the routine's name and its input buffer, each
 * prefixed by its length as a 64-bit integer, and waits for the answer before the next. The
 * stand-in backend echoes, so each answer here is as long as its request: 100 to 500 bytes
 * of buffer (a fixed pseudo-random sequence, the same on every run), behind one of a few
 * routine names. Prints, in microseconds:
 *   setup: SESSIONS sessions, each connect -> the first answer, then closed (once a first
 *          session was answered: until then it tries every 0.5 s, for up to 60 s)
 *   round trip: ROUNDS calls on one session (after 100 unmeasured), p50 and p99
 * as "setup_us p50 P50 p99 P99" and "round_trip_us p50 P50 p99 P99 rounds N". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kWarmup = 100, kMaxRequest = 8 + 32 + 8 + 500 };

static const char* const kRoutines[] = {"cudaLaunchKernel", "cudaMemcpy", "cudaStreamSynchronize",
                                        "cudaGetLastError"};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a;
  const double y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The value at percentile P of N sorted samples (nearest rank). */
static double percentile(double* sorted, int n, int p) {
  int rank = (n * p + 99) / 100;
  return sorted[rank < 1 ? 0 : rank - 1];
}

/* The server's address and port from a GVirtuS properties.json, as the frontend reads it. */
static int read_config(char* host, size_t host_size, char* port, size_t port_size) {
  const char* path = getenv("GVIRTUS_CONFIG");
  char fallback[512];
  if (path == NULL) {
    const char* home = getenv("GVIRTUS_HOME");
    snprintf(fallback, sizeof(fallback), "%s/etc/properties.json",
             home ? home : "/usr/local/gvirtus");
    path = fallback;
  }
  char text[65536];
  FILE* file = fopen(path, "r");
  if (file == NULL) {
    fprintf(stderr, "round-trip-probe: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  const size_t n = fread(text, 1, sizeof(text) - 1, file);
  fclose(file);
  text[n] = '\0';
  const char* keys[] = {"\"server_address\"", "\"port\""};
  char* values[] = {host, port};
  const size_t sizes[] = {host_size, port_size};
  for (int i = 0; i < 2; ++i) {
    const char* at = strstr(text, keys[i]);
    if (at == NULL || (at = strchr(at + strlen(keys[i]), '"')) == NULL) {
      fprintf(stderr, "round-trip-probe: no %s in %s\n", keys[i], path);
      return -1;
    }
    const size_t length = strcspn(at + 1, "\"");
    if (length == 0 || length >= sizes[i]) {
      fprintf(stderr, "round-trip-probe: %s in %s is empty or too long\n", keys[i], path);
      return -1;
    }
    memcpy(values[i], at + 1, length);
    values[i][length] = '\0';
  }
  return 0;
}

static int connect_to(const struct sockaddr_in* address) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return -1;
  }
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (connect(fd, (const struct sockaddr*)address, sizeof(*address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Request I: a routine name and a 100-500 byte buffer, both length-prefixed. */
static size_t build_request(unsigned char* out, unsigned* seed) {
  *seed = *seed * 1103515245u + 12345u;
  const char* routine = kRoutines[(*seed >> 8) % 4];
  const uint64_t name_length = strlen(routine);
  const uint64_t buffer_length = 100 + (*seed >> 12) % 401;
  size_t at = 0;
  memcpy(out + at, &name_length, 8);
  at += 8;
  memcpy(out + at, routine, name_length);
  at += name_length;
  memcpy(out + at, &buffer_length, 8);
  at += 8;
  memset(out + at, (int)(*seed & 0x7f) | 1, buffer_length);
  return at + buffer_length;
}

/* One call: the request written at once, its whole answer read. 0, or -1 on any failure. */
static int exchange(int fd, unsigned* seed) {
  unsigned char request[kMaxRequest];
  unsigned char answer[kMaxRequest];
  const size_t size = build_request(request, seed);
  if (write(fd, request, size) != (ssize_t)size) {
    return -1;
  }
  for (size_t got = 0; got < size;) {
    const ssize_t n = read(fd, answer + got, size - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return -1;
    }
    got += (size_t)n;
  }
  return memcmp(request, answer, size) == 0 ? 0 : -1;
}

static int positive(const char* text, const char* what, long most) {
  char* end = NULL;
  const long value = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 1 || value > most) {
    fprintf(stderr, "round-trip-probe: %s must be a number from 1 to %ld, not \"%s\"\n", what, most,
            text);
    exit(2);
  }
  return (int)value;
}

int main(int argc, char** argv) {
  char host[64];
  char port[8];
  int next = 2;
  if (argc >= 2 && strcmp(argv[1], "config") == 0) {
    if (read_config(host, sizeof(host), port, sizeof(port)) != 0) {
      return 1;
    }
  } else if (argc >= 3 && strlen(argv[1]) < sizeof(host) && strlen(argv[2]) < sizeof(port)) {
    strcpy(host, argv[1]);
    strcpy(port, argv[2]);
    next = 3;
  } else {
    fprintf(stderr,
            "usage: round-trip-probe HOST PORT [ROUNDS [SESSIONS]] | config [ROUNDS [SESSIONS]]\n");
    return 2;
  }
  const int rounds = argc > next ? positive(argv[next], "ROUNDS", 1000000) : 2000;
  const int sessions = argc > next + 1 ? positive(argv[next + 1], "SESSIONS", 10000) : 20;
  struct sockaddr_in address;
  memset(&address, 0, sizeof(address));
  address.sin_family = AF_INET;
  address.sin_port = htons((unsigned short)positive(port, "PORT", 65535));
  if (inet_pton(AF_INET, host, &address.sin_addr) != 1) {
    fprintf(stderr, "round-trip-probe: \"%s\" is not an IPv4 address\n", host);
    return 2;
  }
  double* samples = calloc((size_t)(rounds > sessions ? rounds : sessions), sizeof(double));
  if (samples == NULL) {
    return 1;
  }
  unsigned seed = 56;
  /* A backend may refuse a pod for its first seconds, until the pod is listed among its
   * peers (the session check): the first answered session starts the measurement. */
  for (int tries = 1;; ++tries) {
    const int fd = connect_to(&address);
    const int answered = fd >= 0 && exchange(fd, &seed) == 0;
    if (fd >= 0) {
      close(fd);
    }
    if (answered) {
      break;
    }
    if (tries == 120) {
      fprintf(stderr, "round-trip-probe: %s:%s did not answer within 60 s\n", host, port);
      return 1;
    }
    usleep(500000);
  }
  for (int i = 0; i < sessions; ++i) {
    const double start = now_us();
    const int fd = connect_to(&address);
    if (fd < 0 || exchange(fd, &seed) != 0) {
      fprintf(stderr, "round-trip-probe: session %d with %s:%s failed: %s\n", i + 1, host, port,
              strerror(errno));
      return 1;
    }
    samples[i] = now_us() - start;
    close(fd);
  }
  qsort(samples, (size_t)sessions, sizeof(double), compare);
  printf("setup_us p50 %.0f p99 %.0f sessions %d\n", percentile(samples, sessions, 50),
         percentile(samples, sessions, 99), sessions);
  const int fd = connect_to(&address);
  if (fd < 0) {
    fprintf(stderr, "round-trip-probe: cannot connect to %s:%s: %s\n", host, port, strerror(errno));
    return 1;
  }
  for (int i = -kWarmup; i < rounds; ++i) {
    const double start = now_us();
    if (exchange(fd, &seed) != 0) {
      fprintf(stderr, "round-trip-probe: call %d: no whole answer from %s:%s\n", i + kWarmup + 1,
              host, port);
      return 1;
    }
    if (i >= 0) {
      samples[i] = now_us() - start;
    }
  }
  close(fd);
  qsort(samples, (size_t)rounds, sizeof(double), compare);
  printf("round_trip_us p50 %.1f p99 %.1f rounds %d\n", percentile(samples, rounds, 50),
         percentile(samples, rounds, 99), rounds);
  free(samples);
  return 0;
}
