/*
 * getaddrinfo(3) as an application calls it: one line per IPv4 address, exit 1 on failure.
 * Built with musl-gcc by the real-clients test, so the stub resolver is musl's (no EDNS0; before
 * musl 1.2.4, no retry over TCP: a truncated answer is all it ever gets).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s name\n", argv[0]);
    return 2;
  }
  struct addrinfo hints, *res, *p;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(argv[1], NULL, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "getaddrinfo: %s\n", gai_strerror(rc));
    return 1;
  }
  char text[INET_ADDRSTRLEN];
  for (p = res; p != NULL; p = p->ai_next) {
    struct sockaddr_in *in = (struct sockaddr_in *)p->ai_addr;
    printf("%s\n", inet_ntop(AF_INET, &in->sin_addr, text, sizeof text));
  }
  freeaddrinfo(res);
  return 0;
}
