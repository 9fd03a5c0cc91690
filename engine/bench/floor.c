/* The floor for engine/bench/compare.sh: the least a client of the engine's design can
 * cost per request. One thread, epoll (edge-triggered, each socket registered once for
 * both directions, as the engine does), one write per request and, for a response that
 * fits the buffer, one read; nothing recorded but a count. With keep-alive the same
 * connections carry every request; without, each request connects anew.
 *
 *   floor PORT PATH CONNECTIONS DURATION_S KEEPALIVE(0|1)
 *
 * Prints one JSON line: {"completed": N, "rps": R}. Only Content-Length responses are
 * understood (the bench's nginx serves static files); anything else stops it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTING, READING };
#define READ_BUFFER (256 * 1024)
#define HEAD_MAX 8192

struct conn {
    int fd, state;
    size_t head_len;        /* bytes of the head gathered so far (head not complete) */
    long long body_left;    /* -1 while the head is incomplete */
    char head[HEAD_MAX];
};

static struct sockaddr_in target;
static char request[1024];
static size_t request_len;
static int epfd, keepalive;
static long long completed;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void open_conn(struct conn *c) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) die("socket");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&target, sizeof target) < 0 && errno != EINPROGRESS) die("connect");
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    c->state = CONNECTING;
}

static void send_request(struct conn *c) {
    c->head_len = 0;
    c->body_left = -1;
    if (write(c->fd, request, request_len) != (ssize_t)request_len) die("write (short or failed)");
    c->state = READING;
}

/* Take the head from `data`; returns the bytes of `data` past it, or -1 if incomplete. */
static long take_head(struct conn *c, const char *data, size_t n) {
    size_t before = c->head_len, room = HEAD_MAX - 1 - before, copy = n < room ? n : room;
    memcpy(c->head + before, data, copy);
    c->head_len += copy;
    c->head[c->head_len] = 0;
    char *end = strstr(c->head, "\r\n\r\n");
    if (!end) {
        if (c->head_len >= HEAD_MAX - 1) { fprintf(stderr, "floor: head too long\n"); exit(1); }
        return -1;
    }
    char *cl = strcasestr(c->head, "\r\ncontent-length:");
    if (!cl || cl > end) { fprintf(stderr, "floor: no Content-Length\n"); exit(1); }
    c->body_left = atoll(cl + 17);
    size_t head_end = (size_t)(end + 4 - c->head);
    return (long)(n - (head_end - before));
}

static void on_done(struct conn *c) {
    completed++;
    if (keepalive) {
        send_request(c);
    } else {
        close(c->fd); /* also leaves epoll */
        open_conn(c);
    }
}

static void on_readable(struct conn *c, char *buf) {
    for (;;) {
        ssize_t n = read(c->fd, buf, READ_BUFFER);
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) { fprintf(stderr, "floor: connection closed or failed\n"); exit(1); }
        long body = n;
        if (c->body_left < 0) {
            body = take_head(c, buf, (size_t)n);
            if (body < 0) continue;
        }
        c->body_left -= body;
        if (c->body_left <= 0) { on_done(c); return; }
        if (n < READ_BUFFER) return; /* drained: the next segment raises a new edge */
    }
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: floor PORT PATH CONNECTIONS DURATION_S KEEPALIVE\n"); return 2; }
    int port = atoi(argv[1]), conns = atoi(argv[3]);
    double duration = atof(argv[4]);
    keepalive = atoi(argv[5]);
    target.sin_family = AF_INET;
    target.sin_port = htons(port);
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    request_len = (size_t)snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n",
                                   argv[2], port, keepalive ? "" : "Connection: close\r\n");
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");
    struct conn *all = calloc((size_t)conns, sizeof *all);
    char *buf = malloc(READ_BUFFER);
    if (!all || !buf) die("malloc");
    for (int i = 0; i < conns; i++) open_conn(&all[i]);
    struct epoll_event events[1024];
    double start = now_s(), end = start + duration;
    while (now_s() < end) {
        int n = epoll_wait(epfd, events, 1024, 50);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (events[i].events & (EPOLLERR | EPOLLHUP) && c->state == CONNECTING) die("connect (refused?)");
            if (c->state == CONNECTING) {
                if (events[i].events & EPOLLOUT) send_request(c);
            } else if (events[i].events & EPOLLIN) {
                on_readable(c, buf);
            }
        }
    }
    printf("{\"completed\": %lld, \"rps\": %.1f}\n", completed, completed / (now_s() - start));
    return 0;
}
