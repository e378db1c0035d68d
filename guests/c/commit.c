/* commit MODE: how a run's file changes survive its end. Writes "kept" to kept.txt and closes it
 * (a commit point), then writes "pending" to pending.txt and leaves it open, then ends by MODE:
 *   exit   exit(3)                       (a normal end: everything is committed)
 *   sync   fsync(pending.txt), abort()  (a commit point, then a trap)
 *   trap   abort()                       (a trap: pending.txt is not committed)
 *   wait   print "waiting", then read stdin until its end
 *                                        (kill or the deadline stop it: pending.txt is not committed)
 *   flood  write to stdout forever      (the output cap stops it: pending.txt is not committed)
 * Exit status 2 for a bad MODE, 1 if a file cannot be written. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int put(const char *path, const char *text, int close_it) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        perror(path);
        exit(1);
    }
    if (close_it) close(fd);
    return fd;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    put("kept.txt", "kept", 1);
    int fd = put("pending.txt", "pending", 0);
    if (strcmp(mode, "exit") == 0) exit(3);
    if (strcmp(mode, "sync") == 0) {
        fsync(fd);
        abort();
    }
    if (strcmp(mode, "trap") == 0) abort();
    if (strcmp(mode, "wait") == 0) {
        char buf[256];
        puts("waiting");
        fflush(stdout);
        while (read(STDIN_FILENO, buf, sizeof buf) > 0) {
        }
        return 0;
    }
    if (strcmp(mode, "flood") == 0) {
        for (;;) write(STDOUT_FILENO, "flood\n", 6);
    }
    fprintf(stderr, "usage: commit exit|sync|trap|wait|flood\n");
    return 2;
}
