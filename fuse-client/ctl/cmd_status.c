/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rdmafsctl status, daemons and stats. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xprt.h"
#include "ctl_i.h"

static uint64_t now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* DRAIN_STATUS of a draining daemon: whether it is removable. -errno on failure. */
static int drained(struct ctl *c, const struct ctl_daemon *d, bool *removable, uint64_t *remaining)
{
	Rdmafs__DrainStatusReq req = RDMAFS__DRAIN_STATUS_REQ__INIT;
	Rdmafs__DrainStatusResp *resp;
	int ret;

	req.uuid.data = (uint8_t *)d->uuid;
	req.uuid.len = RDMAFS_UUID_LEN;
	ret = ctl_meta_call(c, RDMAFS__METHOD__METHOD_DRAIN_STATUS, &req.base,
			    &rdmafs__drain_status_resp__descriptor, (ProtobufCMessage **)&resp);
	if (ret)
		return ret;
	*removable = resp->removable;
	*remaining = resp->files_remaining;
	rdmafs__drain_status_resp__free_unpacked(resp, NULL);
	return 0;
}

static void json_addresses(const struct ctl_daemon *d)
{
	ctl_json_begin_array("addresses");
	for (size_t a = 0; a < d->address_count; a++)
		ctl_json_string(NULL, d->addresses[a]);
	ctl_json_end_array();
}

int ctl_cmd_status(struct ctl *c, int argc, char **argv)
{
	uint64_t now = now_unix_ms();
	size_t up = 0;
	int ret = ctl_map_load(c, false);

	if (ret)
		return ctl_exit_for(ret);
	for (size_t i = 0; i < c->map.count; i++)
		up += c->map.daemons[i].state == RDMAFS__DAEMON_STATE__DAEMON_STATE_UP;
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_string("metadata_service", c->meta_uri);
		ctl_json_u64("epoch", c->map.epoch);
		ctl_json_begin_array("daemons");
	} else {
		printf("metadata service %s, cluster map epoch %" PRIu64
		       ": %zu daemons, %zu up\n\n",
		       c->meta_uri, c->map.epoch, c->map.count, up);
		printf("%-36s  %-9s  %10s  %10s  %10s  %s\n", "UUID", "STATE", "CAPACITY", "USED",
		       "HEARTBEAT", "ADDRESS");
	}
	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];
		bool draining = d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_DRAINING;
		bool removable = false;
		uint64_t remaining = 0, age_ms;
		char cap[32], used[32], hb[32];

		if (draining) {
			ret = drained(c, d, &removable, &remaining);
			if (ret)
				return ctl_exit_for(ret);
		}
		age_ms = now > d->last_heartbeat_unix_ms ? now - d->last_heartbeat_unix_ms : 0;
		if (c->json) {
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", d->uuid_text);
			ctl_json_string("state", ctl_state_name(d->state));
			if (draining) {
				ctl_json_bool("drained", removable);
				ctl_json_u64("files_remaining", remaining);
			}
			json_addresses(d);
			ctl_json_u64("capacity_bytes", d->capacity_bytes);
			ctl_json_u64("used_bytes", d->used_bytes);
			ctl_json_u64("last_heartbeat_unix_ms", d->last_heartbeat_unix_ms);
			if (d->last_heartbeat_unix_ms)
				ctl_json_u64("heartbeat_age_ms", age_ms);
			else
				ctl_json_null("heartbeat_age_ms");
			ctl_json_end_object();
			continue;
		}
		if (d->last_heartbeat_unix_ms)
			snprintf(hb, sizeof(hb), "%.1fs ago", (double)age_ms / 1000);
		else
			snprintf(hb, sizeof(hb), "never");
		printf("%-36s  %-9s  %10s  %10s  %10s  %s\n", d->uuid_text,
		       draining && removable ? "drained" : ctl_state_name(d->state),
		       ctl_fmt_bytes(d->capacity_bytes, cap, sizeof(cap)),
		       ctl_fmt_bytes(d->used_bytes, used, sizeof(used)), hb,
		       d->address_count ? d->addresses[0] : "-");
		if (draining && !removable)
			printf("%-36s  (%" PRIu64 " files still to move: rdmafsctl drain %.8s)\n",
			       "", remaining, d->uuid_text);
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	}
	return CTL_EXIT_OK;
}

int ctl_cmd_daemons(struct ctl *c, int argc, char **argv)
{
	int ret = ctl_map_load(c, false);

	if (ret)
		return ctl_exit_for(ret);
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_u64("epoch", c->map.epoch);
		ctl_json_begin_array("daemons");
	} else {
		printf("%-36s  %-9s  %s\n", "UUID", "STATE", "ADDRESSES");
	}
	for (size_t i = 0; i < c->map.count; i++) {
		const struct ctl_daemon *d = &c->map.daemons[i];

		if (c->json) {
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", d->uuid_text);
			ctl_json_string("state", ctl_state_name(d->state));
			json_addresses(d);
			ctl_json_end_object();
			continue;
		}
		printf("%-36s  %-9s ", d->uuid_text, ctl_state_name(d->state));
		for (size_t a = 0; a < d->address_count; a++)
			printf(" %s", d->addresses[a]);
		printf("%s\n", d->address_count ? "" : " -");
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	}
	return CTL_EXIT_OK;
}

/* ---- stats ---- */

/* rdmafs_method_name(), and "other" for what the daemon could not tell apart. */
static void method_name(uint32_t method, char *out, size_t len)
{
	if (method == RDMAFS__METHOD__METHOD_UNSPECIFIED)
		snprintf(out, len, "other");
	else
		rdmafs_method_name(method, out, len);
}

/*
 * The latency below which fraction @p of the calls fell, as the upper bound
 * of the histogram bucket that holds it. -1: in the last, unbounded bucket
 * (slower than every bound). -2: no calls, or a histogram we cannot read.
 */
static int64_t percentile(const Rdmafs__DaemonStatsResp *s, const Rdmafs__OpStats *op, double p)
{
	uint64_t total = 0, seen = 0, target;

	if (op->n_latency_buckets != s->n_latency_bounds_us + 1)
		return -2;
	for (size_t i = 0; i < op->n_latency_buckets; i++) {
		if (op->latency_buckets[i] > UINT64_MAX - total)
			return -2;
		total += op->latency_buckets[i];
	}
	if (total == 0)
		return -2;
	target = (uint64_t)(p * (double)total);
	if (target == 0)
		target = 1;
	for (size_t i = 0; i < op->n_latency_buckets; i++) {
		seen += op->latency_buckets[i];
		if (seen >= target)
			return i < s->n_latency_bounds_us ? (int64_t)s->latency_bounds_us[i] : -1;
	}
	return -1;
}

static bool bounds_ascending(const Rdmafs__DaemonStatsResp *s)
{
	for (size_t i = 1; i < s->n_latency_bounds_us; i++)
		if (s->latency_bounds_us[i] <= s->latency_bounds_us[i - 1])
			return false;
	return s->n_latency_bounds_us > 0;
}

static const double percentiles[] = {0.50, 0.90, 0.99};
static const char *const percentile_keys[] = {"p50", "p90", "p99"};

static void fmt_latency(int64_t us, const Rdmafs__DaemonStatsResp *s, char *out, size_t len)
{
	if (us == -2)
		snprintf(out, len, "-");
	else if (us == -1)
		snprintf(out, len, ">%" PRIu64 "ms",
			 s->latency_bounds_us[s->n_latency_bounds_us - 1] / 1000);
	else if (us >= 1000)
		snprintf(out, len, "<=%" PRId64 "ms", us / 1000);
	else
		snprintf(out, len, "<=%" PRId64 "us", us);
}

static void print_stats(const struct ctl_daemon *d, const Rdmafs__DaemonStatsResp *s)
{
	double up = s->uptime_sec ? (double)s->uptime_sec : 1.0;
	bool hist = bounds_ascending(s);
	char a[32], b[32], lat[3][32], name[48];

	printf("daemon %s  %s  version %s  up %" PRIu64 " s\n", d->uuid_text,
	       d->address_count ? d->addresses[0] : "-", s->version, s->uptime_sec);
	printf("  chunks %" PRIu64 "  capacity %s  free %s  connections %u  in flight %u\n",
	       s->chunks, ctl_fmt_bytes(s->capacity_bytes, a, sizeof(a)),
	       ctl_fmt_bytes(s->free_bytes, b, sizeof(b)), s->connections, s->requests_in_flight);
	printf("  read %s (%.1f KiB/s)", ctl_fmt_bytes(s->bytes_read, a, sizeof(a)),
	       (double)s->bytes_read / up / 1024);
	printf("  written %s (%.1f KiB/s), averaged over the uptime\n",
	       ctl_fmt_bytes(s->bytes_written, b, sizeof(b)), (double)s->bytes_written / up / 1024);
	printf("  errors %" PRIu64 "  checksum errors %" PRIu64 "\n", s->errors,
	       s->checksum_errors);
	printf("  %-16s %10s %8s %10s %9s %9s %9s\n", "OP", "COUNT", "ERRORS", "BYTES", "p50",
	       "p90", "p99");
	for (size_t i = 0; i < s->n_ops; i++) {
		const Rdmafs__OpStats *op = s->ops[i];

		if (!op || op->count == 0)
			continue;
		method_name((uint32_t)op->method, name, sizeof(name));
		for (int p = 0; p < 3; p++)
			fmt_latency(hist ? percentile(s, op, percentiles[p]) : -2, s, lat[p],
				    sizeof(lat[p]));
		printf("  %-16s %10" PRIu64 " %8" PRIu64 " %10s %9s %9s %9s\n", name, op->count,
		       op->errors, ctl_fmt_bytes(op->bytes, a, sizeof(a)), lat[0], lat[1], lat[2]);
	}
	printf("\n");
}

static void json_stats(const struct ctl_daemon *d, const Rdmafs__DaemonStatsResp *s)
{
	double up = s->uptime_sec ? (double)s->uptime_sec : 1.0;
	bool hist = bounds_ascending(s);
	uint64_t total = 0;
	char name[48];

	ctl_json_string("version", s->version);
	ctl_json_u64("uptime_sec", s->uptime_sec);
	ctl_json_u64("chunks", s->chunks);
	ctl_json_u64("capacity_bytes", s->capacity_bytes);
	ctl_json_u64("free_bytes", s->free_bytes);
	ctl_json_u64("bytes_read", s->bytes_read);
	ctl_json_u64("bytes_written", s->bytes_written);
	ctl_json_double("read_bytes_per_sec", (double)s->bytes_read / up);
	ctl_json_double("write_bytes_per_sec", (double)s->bytes_written / up);
	ctl_json_u64("errors", s->errors);
	ctl_json_u64("checksum_errors", s->checksum_errors);
	ctl_json_u64("connections", s->connections);
	ctl_json_u64("requests_in_flight", s->requests_in_flight);
	ctl_json_begin_array("latency_bounds_us");
	for (size_t i = 0; i < s->n_latency_bounds_us; i++)
		ctl_json_u64(NULL, s->latency_bounds_us[i]);
	ctl_json_end_array();
	ctl_json_begin_array("ops");
	for (size_t i = 0; i < s->n_ops; i++) {
		const Rdmafs__OpStats *op = s->ops[i];

		if (!op)
			continue;
		total += op->count;
		method_name((uint32_t)op->method, name, sizeof(name));
		ctl_json_begin_object(NULL);
		ctl_json_string("method", name);
		ctl_json_u64("count", op->count);
		ctl_json_u64("errors", op->errors);
		ctl_json_u64("bytes", op->bytes);
		ctl_json_begin_object("latency_us");
		for (int p = 0; p < 3; p++) {
			int64_t us = hist ? percentile(s, op, percentiles[p]) : -2;

			/* null: no calls, or slower than the last bound */
			if (us < 0)
				ctl_json_null(percentile_keys[p]);
			else
				ctl_json_u64(percentile_keys[p], (uint64_t)us);
		}
		ctl_json_end_object();
		ctl_json_begin_array("latency_buckets");
		for (size_t b = 0; b < op->n_latency_buckets; b++)
			ctl_json_u64(NULL, op->latency_buckets[b]);
		ctl_json_end_array();
		ctl_json_end_object();
	}
	ctl_json_end_array();
	ctl_json_u64("ops_total", total);
}

int ctl_cmd_stats(struct ctl *c, int argc, char **argv)
{
	struct ctl_daemon *one = NULL;
	int ret, status = CTL_EXIT_OK;

	ret = ctl_map_load(c, false);
	if (ret)
		return ctl_exit_for(ret);
	if (argc == 1) {
		ret = ctl_resolve(c, argv[0], &one);
		if (ret)
			return ret == -ENOENT || ret == -EINVAL ? CTL_EXIT_USAGE
								: ctl_exit_for(ret);
	}
	if (c->json) {
		ctl_json_begin_object(NULL);
		ctl_json_begin_array("daemons");
	}
	for (size_t i = 0; i < c->map.count; i++) {
		struct ctl_daemon *d = &c->map.daemons[i];
		Rdmafs__DaemonStatsReq req = RDMAFS__DAEMON_STATS_REQ__INIT;
		Rdmafs__DaemonStatsResp *resp = NULL;
		struct rfs_daemon *handle;

		if (one ? d != one : d->state == RDMAFS__DAEMON_STATE__DAEMON_STATE_REMOVED)
			continue;
		ret = ctl_daemon(c, d, &handle);
		if (!ret)
			ret = rfs_daemon_call(handle, RDMAFS__METHOD__METHOD_DAEMON_STATS,
					      &req.base, &rdmafs__daemon_stats_resp__descriptor,
					      (ProtobufCMessage **)&resp);
		if (c->json) {
			ctl_json_begin_object(NULL);
			ctl_json_string("uuid", d->uuid_text);
			ctl_json_string("state", ctl_state_name(d->state));
			json_addresses(d);
		}
		if (ret) {
			ctl_report_daemon_error(d, ret);
			if (ctl_exit_for(ret) > status)
				status = ctl_exit_for(ret);
			if (c->json) {
				ctl_json_string("error", ctl_daemon_strerror(d, ret));
				ctl_json_end_object();
			}
			continue;
		}
		if (c->json) {
			json_stats(d, resp);
			ctl_json_end_object();
		} else {
			print_stats(d, resp);
		}
		rdmafs__daemon_stats_resp__free_unpacked(resp, NULL);
	}
	if (c->json) {
		ctl_json_end_array();
		ctl_json_end_object();
		ctl_json_finish();
	}
	return status;
}
