#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/path.h"

static lv_status os_error(const char *what, const char *path) {
  int e = errno;
  return lv_status_make(e == ENOENT ? LV_ERR_NOT_FOUND : LV_ERR_IO, "%s %s: %s", what, path,
                        strerror(e));
}

/* Reads fd (then closes it) to its end into a NUL-terminated buffer that starts at cap
 * bytes and doubles; more than max bytes is an error. label names the file in errors. */
static lv_status read_fd(int fd, const char *label, size_t cap, size_t max, char **data, size_t *len) {
  size_t n = 0;
  char *buf = malloc(cap);
  lv_status s = NULL;
  if (!buf) s = lv_status_make(LV_ERR_RESOURCE, "out of memory reading %s (%zu bytes)", label, cap);
  while (!s) {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        s = lv_status_make(LV_ERR_RESOURCE, "out of memory reading %s", label);
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) s = os_error("cannot read", label);
    else if (r == 0) break;
    else if ((n += (size_t)r) > max)
      s = lv_status_make(LV_ERR_INVALID, "%s is more than the limit of %zu bytes", label, max);
  }
  close(fd);
  if (s) {
    free(buf);
    return s;
  }
  buf[n] = 0;
  *data = buf;
  *len = n;
  return NULL;
}

static lv_status not_regular(const char *what, const char *path, mode_t mode) {
  const char *kind = S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
                     : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
  return lv_status_make(LV_ERR_INVALID, "%s%s%s is %s; expected a regular file", what ? what : "", what ? " " : "",
                        path, kind);
}

lv_status lv_file_open_regular(const char *path, const char *what, int *fd) {
  *fd = -1;
  struct stat st;
  /* stat first: opening a FIFO for reading would block until a writer comes. */
  if (stat(path, &st) != 0) {
    int e = errno;
    return lv_status_make(e == ENOENT ? LV_ERR_NOT_FOUND : LV_ERR_IO, "%s%scannot open %s: %s", what ? what : "",
                          what ? ": " : "", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) return not_regular(what, path, st.st_mode);
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) {
    int e = errno;
    return lv_status_make(e == ENOENT ? LV_ERR_NOT_FOUND : LV_ERR_IO, "%s%scannot open %s: %s", what ? what : "",
                          what ? ": " : "", path, strerror(e));
  }
  /* The path may have been replaced between the stat and the open. */
  if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(f);
    return not_regular(what, path, st.st_mode);
  }
  int flags = fcntl(f, F_GETFL);
  if (flags >= 0) fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  return NULL;
}

lv_status lv_file_fopen_regular(const char *path, const char *what, FILE **f) {
  *f = NULL;
  int fd;
  LV_TRY(lv_file_open_regular(path, what, &fd));
  *f = fdopen(fd, "rb");
  if (!*f) {
    lv_status s = os_error("cannot open", path);
    close(fd);
    return s;
  }
  return NULL;
}

lv_status lv_file_read_all(const char *path, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  int fd;
  LV_TRY(lv_file_open_regular(path, NULL, &fd));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    lv_status s = os_error("cannot stat", path);
    close(fd);
    return s;
  }
  return read_fd(fd, path, st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, SIZE_MAX / 4, data, len);
}

lv_status lv_file_read_regular(const char *path, size_t max_bytes, const char *what, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  struct stat st;
  /* stat first: opening a FIFO for reading would block until a writer comes. */
  if (stat(path, &st) != 0) {
    int e = errno;
    return lv_status_make(e == ENOENT ? LV_ERR_NOT_FOUND : LV_ERR_INVALID, "%s %s: cannot read: %s", what, path,
                          strerror(e));
  }
  if (!S_ISREG(st.st_mode)) return not_regular(what, path, st.st_mode);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return lv_status_make(LV_ERR_INVALID, "%s %s: cannot open: %s", what, path, strerror(errno));
  /* The path may have been replaced between the stat and the open. */
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return not_regular(what, path, st.st_mode);
  }
  char label[LV_PATH_MAX + 64];
  snprintf(label, sizeof label, "%s %.*s", what, LV_PATH_MAX, path); /* only a message */
  size_t cap = (uint64_t)st.st_size < max_bytes ? (size_t)st.st_size + 2 : max_bytes / 2 + 1;
  return read_fd(fd, label, cap, max_bytes, data, len);
}

lv_status lv_file_sync_parent_dir(const char *path) {
  char *copy = strdup(path);
  LV_ASSERT(copy);
  const char *dir = dirname(copy);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  free(copy);
  return NULL;
}

/* Writes all of data to fd (retrying short writes and EINTR); false with errno set. */
static bool write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    len -= (size_t)w;
  }
  return true;
}

lv_status lv_file_write_atomic(const char *path, const void *data, size_t len) {
  char tmp[LV_PATH_MAX];
  LV_TRY(lv_path_fmt(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("cannot create", tmp);
  if (!write_all(fd, data, len)) {
    lv_status s = os_error("cannot write", tmp);
    close(fd);
    unlink(tmp);
    return s;
  }
  if (fsync(fd) != 0) {
    lv_status s = os_error("cannot fsync", tmp);
    close(fd);
    unlink(tmp);
    return s;
  }
  close(fd);
  if (rename(tmp, path) != 0) {
    lv_status s = os_error("cannot rename into", path);
    unlink(tmp);
    return s;
  }
  return lv_file_sync_parent_dir(path);
}

lv_status lv_file_append_line(const char *path, const char *line) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return os_error("cannot open", path);
  size_t n = strlen(line);
  char *buf = malloc(n + 1);
  LV_ASSERT(buf);
  memcpy(buf, line, n);
  buf[n] = '\n';
  ssize_t w = write(fd, buf, n + 1);
  free(buf);
  lv_status s = NULL;
  if (w != (ssize_t)(n + 1)) s = os_error("cannot append to", path);
  else fsync(fd);
  close(fd);
  return s;
}

lv_status lv_file_flush_check(FILE *f, const char *name) {
  errno = 0;
  int rc = fflush(f);
  int e = errno;
  if (rc == 0 && !ferror(f)) return NULL;
  return lv_status_make(LV_ERR_IO, "%s: write error: %s", name, e ? strerror(e) : "output lost (an earlier write failed)");
}

lv_status lv_file_mkdirs(const char *path) {
  char buf[4096];
  if (strlen(path) >= sizeof buf) return lv_status_make(LV_ERR_INVALID, "path too long: %s", path);
  strcpy(buf, path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return os_error("cannot create directory", buf);
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return os_error("cannot create directory", buf);
  if (!lv_file_is_dir(buf))
    return lv_status_make(LV_ERR_IO, "%s exists and is not a directory", buf);
  return NULL;
}

bool lv_file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* path with its directory resolved (realpath) and its last component kept, into out[cap];
 * false when the directory cannot be resolved. */
static bool canonical_name(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  char dir[LV_PATH_MAX];
  if (lv_path_fmt(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
                  slash ? path : ".")) {
    return false;
  }
  char *real = realpath(dir, NULL);
  if (!real) return false;
  const char *base = slash ? slash + 1 : path;
  bool ok = lv_path_fmt(out, cap, "%s/%s", strcmp(real, "/") ? real : "", base) == NULL;
  free(real);
  return ok;
}

bool lv_file_same(const char *a, const char *b) {
  struct stat sa, sb;
  bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
  if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char ca[LV_PATH_MAX], cb[LV_PATH_MAX];
  return canonical_name(a, ca, sizeof ca) && canonical_name(b, cb, sizeof cb) && !strcmp(ca, cb);
}

lv_status lv_file_output_target(const char *path, const char *what, char *target, size_t cap, bool *stream) {
  struct stat ls, st;
  *stream = false;
  if (lstat(path, &ls) != 0) return lv_status_wrap(lv_path_fmt(target, cap, "%s", path), "%s", what);
  if (stat(path, &st) != 0)
    return lv_status_make(LV_ERR_INVALID, "%s=%s is a symbolic link to a missing file (%s); expected a regular "
                          "file or a new name", what, path, strerror(errno));
  if (S_ISREG(st.st_mode)) {
    if (!S_ISLNK(ls.st_mode)) return lv_status_wrap(lv_path_fmt(target, cap, "%s", path), "%s", what);
    char *real = realpath(path, NULL);
    if (!real) return lv_status_make(LV_ERR_INVALID, "%s=%s: cannot resolve the link: %s", what, path, strerror(errno));
    lv_status s = lv_status_wrap(lv_path_fmt(target, cap, "%s", real), "%s=%s", what, path);
    free(real);
    return s;
  }
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)) {
    *stream = true;
    return lv_status_wrap(lv_path_fmt(target, cap, "%s", path), "%s", what);
  }
  lv_status s = not_regular(NULL, path, st.st_mode);
  lv_status out = lv_status_make(LV_ERR_INVALID, "%s=%s", what, lv_status_msg(s));
  lv_status_free(s);
  return out;
}

lv_status lv_file_write_stream(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return os_error("cannot open", path);
  bool ok = write_all(fd, data, len);
  lv_status s = ok ? NULL : os_error("cannot write", path);
  if (close(fd) != 0 && !s) s = os_error("cannot write", path);
  return s;
}

bool lv_file_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t lv_file_size(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return (int64_t)st.st_size;
}


lv_status lv_file_check_writable_dir(const char *dir) {
  /* An unusable output directory is the user's to fix: LV_ERR_INVALID (exit code 2). */
  lv_status s = lv_file_mkdirs(dir);
  if (s) {
    lv_status out = lv_status_make(LV_ERR_INVALID, "directory %s is not usable: %s", dir, lv_status_msg(s));
    lv_status_free(s);
    return out;
  }
  if (access(dir, W_OK | X_OK) != 0)
    return lv_status_make(LV_ERR_INVALID, "cannot write into directory %s: %s", dir, strerror(errno));
  return NULL;
}
