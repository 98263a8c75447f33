/* Files and directories. Whole-file reads, atomic whole-file writes (temporary name,
 * fsync, rename, fsync of the directory: a crash leaves the old file or the new one,
 * never half of one), recursive mkdir. Every error names the path and the OS reason. */
#ifndef LV_BASE_FILE_H
#define LV_BASE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

/* Reads the whole file into a malloc'd buffer (NUL-terminated; *len excludes the NUL).
 * A regular file only: a FIFO would block and a device such as /dev/zero never ends. */
lv_status lv_file_read_all(const char *path, char **data, size_t *len);
/* Opens a user-named input for reading, a regular file only (a FIFO, device or directory
 * is an error "WHAT PATH is a FIFO; expected a regular file", without blocking on the
 * FIFO); what (may be NULL) names it in errors. The caller closes *fd / *f. */
lv_status lv_file_open_regular(const char *path, const char *what, int *fd);
lv_status lv_file_fopen_regular(const char *path, const char *what, FILE **f);
/* Reads a user-named text input (config, override file, flagfile): a regular file only
 * (a FIFO, device or directory is an error, so /dev/zero cannot grow memory and a FIFO
 * cannot block) of at most max_bytes; what names it in errors ("experiment file"). The
 * buffer is NUL-terminated; *len excludes the NUL. */
lv_status lv_file_read_regular(const char *path, size_t max_bytes, const char *what, char **data, size_t *len);
/* The cap on config-like text files: 64 MiB. */
#define LV_FILE_TEXT_MAX ((size_t)64 << 20)
/* Writes data to path atomically. */
lv_status lv_file_write_atomic(const char *path, const void *data, size_t len);
/* Appends one line (adds '\n') and fsyncs. */
lv_status lv_file_append_line(const char *path, const char *line);
/* Flushes f and reports a write error seen on it since it was opened (a full disk, a
 * closed pipe) as an error naming name ("stdout"): a tool whose output is lost exits
 * non-zero instead of 0. */
lv_status lv_file_flush_check(FILE *f, const char *name);
/* mkdir -p. */
lv_status lv_file_mkdirs(const char *path);
bool lv_file_exists(const char *path);
bool lv_file_is_dir(const char *path);
/* Whether a and b name one file: the same device and inode when both exist (hard links
 * and symlinks included), else the same path once each one's directory is resolved
 * (realpath), so an output not yet created is caught however it is spelled. A tool
 * refuses to write its output over one of its inputs. */
bool lv_file_same(const char *a, const char *b);
/* Where an output named path (flag what, "--output") is written: *target is path itself
 * for a new name or a regular file, the resolved file for a symbolic link to a regular
 * file (written there, the link kept), and path with *stream set for a FIFO, character
 * device or socket (/dev/stdout, a pipe): write it directly, never rename onto it. A
 * directory, block device or dangling link is an error (LV_ERR_INVALID) naming it. */
lv_status lv_file_output_target(const char *path, const char *what, char *target, size_t cap, bool *stream);
/* Writes data to an existing file opened for writing as it is (no create, no truncate):
 * the output a FIFO or device that lv_file_output_target marked *stream. */
lv_status lv_file_write_stream(const char *path, const void *data, size_t len);
/* Size in bytes, or -1 if it cannot be stat'ed. */
int64_t lv_file_size(const char *path);
/* fsync the directory holding path (after a rename into it). */
lv_status lv_file_sync_parent_dir(const char *path);
/* Checks that dir exists (creating it) and that a file can be created in it. */
lv_status lv_file_check_writable_dir(const char *dir);

#endif
