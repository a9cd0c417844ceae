/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rdmafsctl: administers an rdmafs cluster over the same authenticated
 * protocol as the clients.
 *
 *   rdmafsctl [-m URI] [-s FILE | -k KEYFILE] [--json] [--timeout SEC] COMMAND [ARGS]
 *
 * Where the metadata service is and which secret to use come from, in
 * increasing order of precedence: the built-in defaults (the single-node
 * setup), the config file, the environment (RDMAFS_META,
 * RDMAFS_SECRET_FILE), the command line. See rdmafsctl(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xprt.h"
#include "rdmafs_fs.h"
#include "ctl_i.h"

#ifndef RDMAFS_VERSION
#define RDMAFS_VERSION "unknown"
#endif

#define DEFAULT_META	    "tcp://127.0.0.1:7471"
#define DEFAULT_TIMEOUT_SEC 10

/* Settings gathered from every source; strings are owned. */
struct settings {
	char *meta;
	char *secret_file;
	char *key_file;
	unsigned timeout_sec;
	const char *config_path;
	bool config_given;
};

struct command {
	const char *name;
	int (*fn)(struct ctl *c, int argc, char **argv);
	unsigned flags; /* enum ctl_flag accepted */
	int min_args, max_args;
	const char *usage;
};

static const struct command commands[] = {
	{"status", ctl_cmd_status, 0, 0, 0, "status"},
	{"daemons", ctl_cmd_daemons, 0, 0, 0, "daemons"},
	{"stats", ctl_cmd_stats, 0, 0, 1, "stats [DAEMON]"},
	{"drain", ctl_cmd_drain, CTL_FLAG_WAIT | CTL_FLAG_STATUS, 1, 1,
	 "drain [--wait|--status] DAEMON"},
	{"undrain", ctl_cmd_undrain, 0, 1, 1, "undrain DAEMON"},
	{"remove", ctl_cmd_remove, CTL_FLAG_FORCE, 1, 1, "remove [--force] DAEMON"},
	{"rebalance", ctl_cmd_rebalance, 0, 0, 0, "rebalance"},
	{"scrub", ctl_cmd_scrub, CTL_FLAG_NO_WAIT | CTL_FLAG_STATUS | CTL_FLAG_REPAIR, 0, 1,
	 "scrub [--no-wait|--status] [--repair] [DAEMON]"},
	{"fsck", ctl_cmd_fsck, CTL_FLAG_REPAIR, 0, 0, "fsck [--repair]"},
	{"client", ctl_cmd_client, CTL_FLAG_READ_ONLY | CTL_FLAG_ROOT_SQUASH | CTL_FLAG_OUT, 1, 2,
	 "client add [--read-only] [--root-squash] [--out FILE] NAME | client list | "
	 "client revoke NAME"},
};

unsigned ctl_flags;
const char *ctl_out_file;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rdmafsctl [OPTIONS] COMMAND [ARGS]\n"
		"\n"
		"Commands:\n"
		"  status                  the cluster map: epoch, daemons, state, capacity, use\n"
		"                          (removed daemons are no longer listed)\n"
		"  daemons                 the storage daemons and their addresses\n"
		"  stats [DAEMON]          ops, bandwidth, latency percentiles, errors\n"
		"  drain [--wait] DAEMON   move every chunk off DAEMON, then mark it removable\n"
		"  drain --status DAEMON   what is left to move\n"
		"  undrain DAEMON          end a drain: DAEMON is up again, new chunks land on it\n"
		"  remove [--force] DAEMON take a drained daemon out of the cluster\n"
		"  rebalance               move files to the daemons placement picks now, so\n"
		"                          daemons added since get their share (online, fenced)\n"
		"  scrub [DAEMON]          read every chunk and verify its checksums\n"
		"        [--no-wait]       start and return; [--status]: the last result\n"
		"        [--repair]        then rewrite each bad chunk from a good copy on\n"
		"                          another daemon of its chain (replicated files)\n"
		"  fsck [--repair]         metadata against chunks: orphan chunks, lost files,\n"
		"                          bad chunks; --repair removes the orphans\n"
		"  client add NAME         issue a client key, written to ./NAME.key (mode 0600)\n"
		"         [--read-only] [--root-squash] [--out FILE]\n"
		"  client list             every key issued: name, flags, serial, revoked\n"
		"  client revoke NAME      revoke NAME's key: daemons refuse it from now on\n"
		"\n"
		"DAEMON is a name, a UUID, a unique UUID prefix, or one of its addresses.\n"
		"Commands that visit every daemon skip those the map shows down, and say so.\n"
		"\n"
		"Options:\n"
		"  -m, --meta URI          the metadata service (default %s)\n"
		"  -s, --secret-file FILE  the cluster secret (default %s)\n"
		"  -k, --key-file FILE     a client key instead of the secret (not for\n"
		"                          administration: drain, remove, scrub, fsck, client)\n"
		"  -c, --config FILE       settings file (default %s, if present)\n"
		"      --json              JSON output for scripts\n"
		"      --timeout SEC       per call and connect (default %d)\n"
		"      --log-level LEVEL   debug, info, warning or error: messages of the client\n"
		"                          library and the transport at LEVEL and worse on stderr\n"
		"                          (default: warnings of the library, no transport)\n"
		"  -v, --verbose           --log-level debug\n"
		"  -h, --help              this text\n"
		"  -V, --version           print \"rdmafsctl VERSION\" and exit\n"
		"\n"
		"Environment: RDMAFS_META, RDMAFS_SECRET_FILE, RDMAFS_KEY_FILE (flags win over\n"
		"them, they over the config file: [client] meta = URI, secret_file = FILE,\n"
		"key_file = FILE; [rdmafsctl]\n"
		"timeout = SEC), RDMAFS_CLIENT_CONF (the config file).\n"
		"\n"
		"Exit status: 0 ok, 1 problems found (scrub, fsck) or a DEGRADED cluster\n"
		"(status), 2 usage or configuration error, 3 the metadata service or a daemon\n"
		"unreachable, 4 the operation failed or was refused, 5 the cluster's health is\n"
		"ERROR (status).\n",
		DEFAULT_META, rfs_default_secret_file(), rfs_client_conf_path(),
		DEFAULT_TIMEOUT_SEC);
}

static int set_string(char **dst, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static int parse_timeout(const char *text, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || v == 0 || v > 3600)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* [rdmafsctl] in client.conf: timeout = SEC. */
static int config_key(void *arg, const char *key, const char *value, char *why, size_t why_len)
{
	struct settings *s = arg;

	if (strcmp(key, "timeout") != 0)
		return -ENOENT;
	if (parse_timeout(value, &s->timeout_sec) == 0)
		return 0;
	snprintf(why, why_len, "timeout = %s: must be 1..3600 seconds", value);
	return -EINVAL;
}

/* Reads client.conf; a missing default file is fine, a missing named one is not. */
static int load_config(struct settings *s)
{
	struct rfs_client_conf conf;
	char why[512];
	int ret = rfs_client_conf_load(s->config_path, s->config_given, "rdmafsctl", config_key, s,
				       &conf, why, sizeof(why));

	if (ret) {
		ctl_err("%s", why);
		return ret;
	}
	s->meta = conf.meta_uri;
	s->secret_file = conf.secret_file;
	s->key_file = conf.key_file;
	conf.meta_uri = conf.secret_file = conf.key_file = NULL;
	rfs_client_conf_free(&conf);
	return 0;
}

/* Reads the cluster secret into @c; says why when it cannot. */
static int read_secret(const char *path, struct ctl *c)
{
	int ret = rdmafs_read_secret(path, &c->secret, &c->secret_len);
	char why[1024];

	if (ret == -EINVAL || ret == -EPERM)
		ctl_err("%s", rdmafs_secret_strerror(path, ret, why, sizeof(why)));
	else if (ret)
		ctl_err("%s (give it with -s FILE or RDMAFS_SECRET_FILE)",
			rdmafs_secret_strerror(path, ret, why, sizeof(why)));
	return ret;
}

/* Checks the key file @path and names its client in @c; says why when it cannot. */
static int read_key(const char *path, struct ctl *c)
{
	struct xprt_key key;
	char why[1024];
	int ret = rdmafs_key_read(path, &key);

	if (ret) {
		ctl_err("%s", rdmafs_key_strerror(path, ret, why, sizeof(why)));
		return ret;
	}
	snprintf(c->key_name, sizeof(c->key_name), "%s", key.name);
	memset(&key, 0, sizeof(key));
	c->key_file = path;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"meta", required_argument, NULL, 'm'},
		{"secret-file", required_argument, NULL, 's'},
		{"config", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},
		{"timeout", required_argument, NULL, 't'},
		{"verbose", no_argument, NULL, 'v'},
		{"log-level", required_argument, NULL, 'L'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"wait", no_argument, NULL, 'W'},
		{"no-wait", no_argument, NULL, 'N'},
		{"status", no_argument, NULL, 'S'},
		{"repair", no_argument, NULL, 'R'},
		{"force", no_argument, NULL, 'F'},
		{"key-file", required_argument, NULL, 'k'},
		{"read-only", no_argument, NULL, 'O'},
		{"root-squash", no_argument, NULL, 'Q'},
		{"out", required_argument, NULL, 'o'},
		{NULL, 0, NULL, 0},
	};
	struct settings s = {.timeout_sec = DEFAULT_TIMEOUT_SEC,
			     .config_path = rfs_client_conf_path()};
	char *flag_meta = NULL, *flag_secret = NULL, *flag_key = NULL;
	unsigned flag_timeout = 0;
	const struct command *cmd = NULL;
	struct ctl c = {0};
	enum rdmafs_log_level log_level = RDMAFS_LOG_WARN;
	const char *env;
	int opt, nargs, status = CTL_EXIT_USAGE;

	/* what the client code it shares says (a chunk that fails its checksum, ...) */
	rdmafs_log_init("rdmafsctl", RDMAFS_LOG_WARN);
	while ((opt = getopt_long(argc, argv, "m:s:k:c:vhV", options, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (set_string(&flag_meta, optarg))
				goto out_free;
			break;
		case 's':
			if (set_string(&flag_secret, optarg))
				goto out_free;
			break;
		case 'k':
			if (set_string(&flag_key, optarg))
				goto out_free;
			break;
		case 'O':
			ctl_flags |= CTL_FLAG_READ_ONLY;
			break;
		case 'Q':
			ctl_flags |= CTL_FLAG_ROOT_SQUASH;
			break;
		case 'o':
			ctl_flags |= CTL_FLAG_OUT;
			ctl_out_file = optarg;
			break;
		case 'c':
			s.config_path = optarg;
			s.config_given = true;
			break;
		case 'j':
			c.json = true;
			break;
		case 't':
			if (parse_timeout(optarg, &flag_timeout)) {
				ctl_err("--timeout wants 1..3600 seconds, not \"%s\"", optarg);
				goto out_free;
			}
			break;
		case 'v':
			c.verbose = true;
			log_level = RDMAFS_LOG_DEBUG;
			break;
		case 'L':
			if (rdmafs_log_parse_level(optarg, &log_level)) {
				ctl_err("--log-level takes debug, info, warning or error, not "
					"\"%s\"",
					optarg);
				goto out_free;
			}
			c.verbose = true;
			break;
		case 'h':
			usage(stdout);
			status = CTL_EXIT_OK;
			goto out_free;
		case 'V':
			printf("rdmafsctl %s\n", RDMAFS_VERSION);
			status = CTL_EXIT_OK;
			goto out_free;
		case 'W':
			ctl_flags |= CTL_FLAG_WAIT;
			break;
		case 'N':
			ctl_flags |= CTL_FLAG_NO_WAIT;
			break;
		case 'S':
			ctl_flags |= CTL_FLAG_STATUS;
			break;
		case 'R':
			ctl_flags |= CTL_FLAG_REPAIR;
			break;
		case 'F':
			ctl_flags |= CTL_FLAG_FORCE;
			break;
		default:
			usage(stderr);
			goto out_free;
		}
	}
	rdmafs_log_set_level(log_level);
	if (optind >= argc) {
		ctl_err("no command given");
		usage(stderr);
		goto out_free;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			cmd = &commands[i];
	if (!cmd) {
		ctl_err("unknown command \"%s\" (rdmafsctl --help lists them)", argv[optind]);
		goto out_free;
	}
	nargs = argc - optind - 1;
	if (nargs < cmd->min_args || nargs > cmd->max_args || (ctl_flags & ~cmd->flags) ||
	    ((ctl_flags & CTL_FLAG_STATUS) && (ctl_flags & (CTL_FLAG_WAIT | CTL_FLAG_NO_WAIT)))) {
		ctl_err("usage: rdmafsctl [OPTIONS] %s", cmd->usage);
		goto out_free;
	}

	if (load_config(&s))
		goto out_free;
	env = getenv("RDMAFS_META");
	if (env && *env && set_string(&s.meta, env))
		goto out_free;
	env = getenv("RDMAFS_SECRET_FILE");
	if (env && *env && set_string(&s.secret_file, env))
		goto out_free;
	env = getenv("RDMAFS_KEY_FILE");
	if (env && *env && set_string(&s.key_file, env))
		goto out_free;
	if (flag_meta && set_string(&s.meta, flag_meta))
		goto out_free;
	if (flag_key && set_string(&s.key_file, flag_key))
		goto out_free;
	if (flag_key && flag_secret) {
		ctl_err("give --key-file or --secret-file, not both");
		goto out_free;
	}
	/* a key from anywhere is used, unless -s on the command line asks for the secret */
	if (flag_secret) {
		free(s.key_file);
		s.key_file = NULL;
	}
	if (flag_secret && set_string(&s.secret_file, flag_secret))
		goto out_free;
	if (flag_timeout)
		s.timeout_sec = flag_timeout;
	if ((!s.meta && set_string(&s.meta, DEFAULT_META)) ||
	    (!s.secret_file && set_string(&s.secret_file, rfs_default_secret_file())))
		goto out_free;
	if (xprt_uri_parse(s.meta, &(enum xprt_kind){0}, (char[256]){0}, 256, &(uint16_t){0})) {
		ctl_err("\"%s\" is not a metadata service address (tcp://HOST:PORT, "
			"rdma://HOST:PORT)",
			s.meta);
		goto out_free;
	}
	if (s.key_file ? read_key(s.key_file, &c) : read_secret(s.secret_file, &c))
		goto out_free;
	c.meta_uri = s.meta;
	c.timeout_ms = s.timeout_sec * 1000u;
	/* A peer that closes its socket must give an error, not kill us. */
	signal(SIGPIPE, SIG_IGN);

	status = ctl_session_open(&c);
	if (status == CTL_EXIT_OK) {
		status = cmd->fn(&c, nargs, argv + optind + 1);
		ctl_session_close(&c);
	}
out_free:
	free(c.secret);
	free(flag_meta);
	free(flag_secret);
	free(flag_key);
	free(s.meta);
	free(s.secret_file);
	free(s.key_file);
	return status;
}
