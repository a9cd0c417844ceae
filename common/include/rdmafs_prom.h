/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * librdmafs_prom: Prometheus metrics served over HTTP, written once for
 * every program that serves them (rdmafs-daemon, rdmafs-fuse).
 *
 *  - the text exposition format (version 0.0.4): families with HELP and
 *    TYPE, samples, label values escaped, histograms of struct
 *    rdmafs_latency (rdmafs_common.h) with le= in seconds;
 *  - an HTTP server (libmicrohttpd, one thread of its own) that answers GET
 *    and HEAD of /metrics with what a render callback writes, 404 for any
 *    other path. The socket is bound here, not by libmicrohttpd, so that a
 *    port in use is reported with its errno and the port chosen for port 0
 *    is known before the first scrape.
 *
 * Linked by the programs that serve metrics; it needs libmicrohttpd, which
 * nothing else in common/ does.
 *
 * Threads: the writers may be called from any thread on a FILE the caller
 * owns. The render callback runs on the server's thread, one scrape at a
 * time.
 * Errors: 0 or a negative errno.
 */
#ifndef RDMAFS_PROM_H
#define RDMAFS_PROM_H

#include <stdint.h>
#include <stdio.h>

#include "rdmafs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the text format ------------------------------------------------------------ */

/* "# HELP @name @help" and "# TYPE @name @type" (counter, gauge, histogram). */
void rdmafs_prom_family(FILE *f, const char *name, const char *type, const char *help);

/* Writes @value with \, " and newline escaped, as a label value must be. */
void rdmafs_prom_label_value(FILE *f, const char *value);

/*
 * One sample "@name{@labels} @value"; @labels is what goes between the
 * braces, already escaped (e.g. op="LOOKUP"), or NULL or "" for none.
 */
void rdmafs_prom_sample(FILE *f, const char *name, const char *labels, uint64_t value);

/* One sample of @ns nanoseconds, written in seconds. */
void rdmafs_prom_sample_seconds(FILE *f, const char *name, const char *labels, uint64_t ns);

/* A family of one sample without labels. */
void rdmafs_prom_counter(FILE *f, const char *name, const char *help, uint64_t value);
void rdmafs_prom_gauge(FILE *f, const char *name, const char *help, uint64_t value);

/*
 * One histogram of a family (its HELP and TYPE written before): cumulative
 * @name_bucket samples with le= each bound of rdmafs_latency_bounds_us in
 * seconds and "+Inf", then @name_sum (seconds) and @name_count, each with
 * @labels (as rdmafs_prom_sample()) before le.
 */
void rdmafs_prom_histogram(FILE *f, const char *name, const char *labels,
			   const struct rdmafs_latency *h);

/* @us microseconds as seconds in decimal, exactly: 50 -> "0.00005", 1000000 -> "1". */
const char *rdmafs_prom_seconds_text(uint64_t us, char *out, size_t len);

/* ---- the HTTP server ------------------------------------------------------------ */

struct rdmafs_prom;

/*
 * Writes every metric to @f. Returns 0, or a negative errno to fail the
 * scrape (the server then closes the connection without an answer).
 */
typedef int (*rdmafs_prom_render_cb)(void *arg, FILE *f);

struct rdmafs_prom_options {
	const char *listen;    /* "HOST:PORT", "[ADDR]:PORT" for IPv6; port 0: any free port */
	const char *port_file; /* where to write the port bound once serving, or NULL */
	const char *setting;   /* the setting that named @listen, for error lines */
	rdmafs_prom_render_cb render;
	void *arg; /* for @render */
};

/*
 * Splits @listen ("HOST:PORT", "[ADDR]:PORT") into @host (@host_size bytes)
 * and *@port. -EINVAL when it is not of that form (a URI with a scheme
 * included) or the port is not in 0..65535.
 */
int rdmafs_prom_parse_listen(const char *listen, char *host, size_t host_size, uint16_t *port);

/*
 * Binds @o->listen, starts serving /metrics from a thread of libmicrohttpd's
 * own, writes @o->port_file and logs "metrics at http://HOST:PORT/metrics"
 * with the port bound. The strings of @o need not outlive the call. Every
 * failure is logged in an operator's words. Returns 0, -EINVAL (a malformed
 * address or a host that does not resolve), -EADDRINUSE, -EADDRNOTAVAIL,
 * -EACCES, -EIO (the server did not start), -ENOMEM, or the errno of
 * writing the port file.
 */
int rdmafs_prom_start(const struct rdmafs_prom_options *o, struct rdmafs_prom **out);

/* The port bound. */
uint16_t rdmafs_prom_port(const struct rdmafs_prom *p);

/* Stops serving (a scrape in progress finishes first) and frees. NULL is a no-op. */
void rdmafs_prom_stop(struct rdmafs_prom *p);

#ifdef __cplusplus
}
#endif

#endif /* RDMAFS_PROM_H */
