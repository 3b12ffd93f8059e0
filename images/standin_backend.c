/* gvirtus-backend of the GVirtuS stand-in image (Dockerfile.gvirtus-standin): a TCP echo
 * server that listens the way GVirtuS's TCP communicator does, so that the tests meet what
 * the real backend meets. No CUDA runs.
 *
 *   gvirtus-backend CONFIG.json    (the port from CONFIG's "port", default 9999)
 *
 * Like GVirtuS it listens on 0.0.0.0 in a forked child ("gvirtus-listen") while the parent
 * stays alive, listening on nothing, when that child dies. It asks for SO_REUSEADDR as
 * TcpCommunicator::Serve() does, with a one-byte value (char on = 1), which Linux refuses
 * (EINVAL), and ignores the answer: on its own it cannot bind while an old connection on the
 * port lingers (TIME_WAIT, FIN_WAIT2, LAST_ACK), says "TcpCommunicator: Can't bind socket:
 * Address already in use." and never listens. With the shim's guard library preloaded, the
 * request is passed on as an int and the bind works at once. It says on stderr which it was.
 * Like GVirtuS (src/backend/Process.cpp) each connection is served by a thread of the
 * listening child, and the threads share the process's state, as GVirtuS's sessions share
 * one CUDA context. A thread echoes what it reads until the client closes, except a read
 * that starts with "standin ": that is a command line, answered, not echoed:
 *   standin pid         -> "pid N" (the serving process)
 *   standin put TEXT    -> "ok" (TEXT becomes the process's note)
 *   standin get         -> "got TEXT" (the note, whichever connection put it)
 *   standin crash       -> the process aborts, every connection it serves with it
 *   standin read PATH   -> "read N bytes" or "cannot read: REASON" (a file of its container,
 *                          as a tenant that took the backend over would try)
 *   standin cuda malloc BYTES -> "RESULT ADDRESS" (cudaMalloc: 0 and an address, or 2 and 0
 *                          when out of memory, or past the pod's share under the shim)
 *   standin cuda free ADDRESS -> "RESULT" (cudaFree)
 *   standin cuda meminfo -> "RESULT FREE TOTAL" (cudaMemGetInfo)
 * It has no SIGTERM handler: the shim stops its whole process group. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The CUDA runtime's allocation calls, from libcudart.so.12 (standin_cudart.c here, the
 * real one under GVirtuS), as GVirtuS's cudart plugin makes them for a session. */
int cudaMalloc(void** pointer, size_t bytes);
int cudaFree(void* pointer);
int cudaMemGetInfo(size_t* free, size_t* total);

static int config_port(const char* path) {
  char text[65536];
  FILE* file = fopen(path, "r");
  if (file == NULL) {
    return 9999;
  }
  const size_t n = fread(text, 1, sizeof(text) - 1, file);
  fclose(file);
  text[n] = '\0';
  const char* at = strstr(text, "\"port\"");
  if (at == NULL) {
    return 9999;
  }
  at += strlen("\"port\"");
  while (*at == ' ' || *at == ':' || *at == '"' || *at == '\t' || *at == '\n') {
    ++at;
  }
  const long port = strtol(at, NULL, 10);
  return port > 0 && port < 65536 ? (int)port : 9999;
}

static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;
static char note[256];

static int send_all(int connection, const char* data, size_t size) {
  for (size_t sent = 0; sent < size;) {
    const ssize_t w = write(connection, data + sent, size - sent);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return -1;
    }
    sent += (size_t)w;
  }
  return 0;
}

/* A command line ("standin ..."): its answer, or -1 to end the session. */
static int command(int connection, char* line) {
  char* end = strchr(line, '\n');
  if (end != NULL) {
    *end = '\0';
  }
  char reply[300];
  if (strcmp(line, "standin pid") == 0) {
    snprintf(reply, sizeof(reply), "pid %d\n", (int)getpid());
  } else if (strncmp(line, "standin put ", 12) == 0) {
    pthread_mutex_lock(&note_lock);
    const size_t length = strnlen(line + 12, sizeof(note) - 1);
    memcpy(note, line + 12, length);
    note[length] = '\0';
    pthread_mutex_unlock(&note_lock);
    snprintf(reply, sizeof(reply), "ok\n");
  } else if (strcmp(line, "standin get") == 0) {
    pthread_mutex_lock(&note_lock);
    snprintf(reply, sizeof(reply), "got %s\n", note);
    pthread_mutex_unlock(&note_lock);
  } else if (strcmp(line, "standin crash") == 0) {
    abort();
  } else if (strncmp(line, "standin cuda malloc ", 20) == 0) {
    void* pointer = NULL;
    const int result = cudaMalloc(&pointer, (size_t)strtoull(line + 20, NULL, 10));
    snprintf(reply, sizeof(reply), "%d %llu\n", result,
             (unsigned long long)(uintptr_t)pointer);
  } else if (strncmp(line, "standin cuda free ", 18) == 0) {
    const int result = cudaFree((void*)(uintptr_t)strtoull(line + 18, NULL, 10));
    snprintf(reply, sizeof(reply), "%d\n", result);
  } else if (strcmp(line, "standin cuda meminfo") == 0) {
    size_t free = 0;
    size_t total = 0;
    const int result = cudaMemGetInfo(&free, &total);
    snprintf(reply, sizeof(reply), "%d %zu %zu\n", result, free, total);
  } else if (strncmp(line, "standin read ", 13) == 0) {
    FILE* file = fopen(line + 13, "r");
    if (file == NULL) {
      snprintf(reply, sizeof(reply), "cannot read: %s\n", strerror(errno));
    } else {
      char content[4096];
      const size_t n = fread(content, 1, sizeof(content), file);
      fclose(file);
      snprintf(reply, sizeof(reply), "read %zu bytes\n", n);
    }
  } else {
    snprintf(reply, sizeof(reply), "unknown\n");
  }
  return send_all(connection, reply, strlen(reply));
}

static void* session(void* argument) {
  const int connection = (int)(intptr_t)argument;
  char buffer[16385];
  for (;;) {
    ssize_t n = read(connection, buffer, sizeof(buffer) - 1);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    buffer[n] = '\0';
    const int failed = strncmp(buffer, "standin ", 8) == 0
                           ? command(connection, buffer)
                           : send_all(connection, buffer, (size_t)n);
    if (failed != 0) {
      break;
    }
  }
  close(connection);
  return NULL;
}

/* TcpCommunicator::Serve(), then its accept loop. Returns only when it cannot listen. */
static int serve(int port) {
  prctl(PR_SET_NAME, "gvirtus-listen", 0, 0, 0);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) {
    fprintf(stderr, "TcpCommunicator: Can't create socket: %s.\n", strerror(errno));
    return 1;
  }
  struct sockaddr_in address;
  memset(&address, 0, sizeof(address));
  address.sin_family = AF_INET;
  address.sin_port = htons((unsigned short)port);
  address.sin_addr.s_addr = INADDR_ANY;
  char on = 1;
  if (setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == 0) {
    fprintf(stderr, "gvirtus-backend stand-in: SO_REUSEADDR (1-byte value) set\n");
  } else {
    fprintf(stderr, "gvirtus-backend stand-in: SO_REUSEADDR (1-byte value) refused: %s\n",
            strerror(errno));
  }
  if (bind(listener, (struct sockaddr*)&address, sizeof(address)) != 0) {
    fprintf(stderr, "TcpCommunicator: Can't bind socket: %s.\n", strerror(errno));
    return 1;
  }
  if (listen(listener, 5) != 0) {
    fprintf(stderr, "TcpCommunicator: Can't listen from socket: %s.\n", strerror(errno));
    return 1;
  }
  fprintf(stderr, "gvirtus-backend stand-in (no CUDA): echo server on port %d\n", port);
  for (;;) {
    const int connection = accept(listener, NULL, NULL);
    if (connection < 0) {
      if (errno != EINTR) {
        usleep(10000); /* ECONNABORTED, EMFILE, ... */
      }
      continue;
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, session, (void*)(intptr_t)connection) != 0) {
      close(connection);
      continue;
    }
    pthread_detach(thread);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gvirtus-backend CONFIG.json\n");
    return 2;
  }
  const int port = config_port(argv[argc - 1]);
  const pid_t child = fork();
  if (child == 0) {
    return serve(port);
  }
  if (child < 0) {
    fprintf(stderr, "gvirtus-backend stand-in: fork: %s\n", strerror(errno));
    return 1;
  }
  /* As GVirtuS's parent: alive, listening on nothing, once its child is gone. */
  while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
  }
  for (;;) {
    pause();
  }
}
