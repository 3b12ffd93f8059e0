/* Prints the real and effective user and group ids of the process, as
 * "uid=65532 gid=65532 euid=65532 egid=65532". Built static in the builder image and
 * mounted into the runtime images by images/build.sh --test (they have no `id`). */
#include <stdio.h>
#include <unistd.h>

int main(void) {
  printf("uid=%u gid=%u euid=%u egid=%u\n", (unsigned)getuid(), (unsigned)getgid(),
         (unsigned)geteuid(), (unsigned)getegid());
  return 0;
}
