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
 * Each connection gets a forked child ("gvirtus-session") that echoes what it reads until
 * the client closes, as the socat it replaces did (TCP-LISTEN:PORT,fork EXEC:cat). It has no
 * SIGTERM handler: the shim stops its whole process group. */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int config_port(const char* path) {
  char text[65536];
  FILE* file = fopen(path, "r");
  if (file == NULL)
    return 9999;
  const size_t n = fread(text, 1, sizeof(text) - 1, file);
  fclose(file);
  text[n] = '\0';
  const char* at = strstr(text, "\"port\"");
  if (at == NULL)
    return 9999;
  at += strlen("\"port\"");
  while (*at == ' ' || *at == ':' || *at == '"' || *at == '\t' || *at == '\n')
    ++at;
  const long port = strtol(at, NULL, 10);
  return port > 0 && port < 65536 ? (int)port : 9999;
}

static void echo(int connection) {
  char buffer[16384];
  for (;;) {
    ssize_t n = read(connection, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    for (ssize_t sent = 0; sent < n;) {
      const ssize_t w = write(connection, buffer + sent, (size_t)(n - sent));
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return;
      sent += w;
    }
  }
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
  signal(SIGCHLD, SIG_IGN); /* sessions are reaped by the kernel */
  for (;;) {
    const int connection = accept(listener, NULL, NULL);
    if (connection < 0) {
      if (errno != EINTR)
        usleep(10000); /* ECONNABORTED, EMFILE, ... */
      continue;
    }
    const pid_t session = fork();
    if (session == 0) {
      prctl(PR_SET_NAME, "gvirtus-session", 0, 0, 0);
      close(listener);
      echo(connection);
      _exit(0);
    }
    close(connection);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gvirtus-backend CONFIG.json\n");
    return 2;
  }
  const int port = config_port(argv[argc - 1]);
  const pid_t child = fork();
  if (child == 0)
    return serve(port);
  if (child < 0) {
    fprintf(stderr, "gvirtus-backend stand-in: fork: %s\n", strerror(errno));
    return 1;
  }
  /* As GVirtuS's parent: alive, listening on nothing, once its child is gone. */
  while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
  }
  for (;;)
    pause();
}
