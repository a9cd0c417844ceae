// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rdmafs-fuse: mounts an rdmafs cluster with the libfuse3 low-level API.
 *
 *   rdmafs-fuse [-f] [-o meta=tcp://host:port,secret=/etc/rdmafs/secret] MOUNTPOINT
 *   rdmafs-fuse SOURCE MOUNTPOINT [-o ...]     (the form mount.fuse3 uses)
 *
 * FUSE inode numbers are the metadata service's inode numbers. Every
 * operation is one call of the client core's filesystem API (rdmafs_fs.h),
 * with the caller's credentials, which the service checks, plus, for file
 * data, its striped chunk I/O to the storage daemons. mount_i.h says which
 * file holds which concern.
 *
 * File size: writes grow the size locally; the metadata service learns it
 * (UPDATE_SIZE) when a write extends the file and a second passed since the
 * last update, at flush (every close), fsync and release, so another client
 * sees the right size after close. fsync and close also CHUNK_COMMIT the
 * daemons that received writes. OPEN returns fresh attributes and the layout:
 * close-to-open consistency, as NFS gives.
 *
 * Metrics: with metrics=HOST:PORT the mount serves its own counters and its
 * client core's at http://HOST:PORT/metrics (metrics.c), from a thread
 * started after fuse_daemonize(), as every thread is.
 *
 * Errors: 0 / negative errno everywhere; only ops.c's reply_error() turns
 * them positive for fuse_reply_err().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "rdmafs_common.h"
#include "rdmafs_fs.h"
#include "xprt.h" /* XPRT_BUSY_POLL_MAX_US */
#include "mount_i.h"

/* ---- command line ------------------------------------------------------------------------ */

struct mount_opts {
	char *meta;
	char *secret;
	char *key; /* key=FILE: a client key instead of the secret */
	char *transport;
	char *timeout;
	char *log_file;		 /* log=FILE: append the log there */
	char *log_level;	 /* log_level=LEVEL */
	char *config;		 /* config=FILE: client.conf to read */
	char *metrics;		 /* metrics=HOST:PORT: serve /metrics there */
	char *metrics_port_file; /* metrics_port_file=FILE: write the port bound there */
	unsigned readahead_kb;
	int write_behind; /* write_behind=N: writes of a file in flight; 0: none */
	int busy_poll_us; /* busy_poll_us=N; INT_MIN: not given */
	int server_permissions;
	int async_dirops; /* unlinks answered at once, sent in the background */
	double attr_timeout, entry_timeout, negative_timeout;
	char *nonopt[2]; /* [SOURCE] MOUNTPOINT */
	int nonopt_count;
	int help;
};

enum { KEY_HELP, KEY_DISCARD };

/* write_behind=N's bound; the buffers it may hold are bounded apart (rdmafs_fs.h) */
#define WRITE_BEHIND_MAX 64

#define MOPT(t, p)                                   \
	{                                            \
		t, offsetof(struct mount_opts, p), 1 \
	}
static const struct fuse_opt mount_spec[] = {
	MOPT("meta=%s", meta), MOPT("secret=%s", secret), MOPT("key=%s", key),
	MOPT("transport=%s", transport), MOPT("config=%s", config), MOPT("timeout=%s", timeout),
	MOPT("log=%s", log_file), MOPT("log_level=%s", log_level), MOPT("metrics=%s", metrics),
	MOPT("metrics_port_file=%s", metrics_port_file),
	/* what the other programs take, for people who start it by hand */
	MOPT("--log-level %s", log_level), MOPT("readahead=%u", readahead_kb),
	MOPT("write_behind=%d", write_behind), MOPT("busy_poll_us=%d", busy_poll_us),
	MOPT("server_permissions", server_permissions), MOPT("async_dirops", async_dirops),
	MOPT("attr_timeout=%lf", attr_timeout), MOPT("entry_timeout=%lf", entry_timeout),
	MOPT("negative_timeout=%lf", negative_timeout), FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	/* fstab options meant for mount(8) and systemd, not for the kernel */
	FUSE_OPT_KEY("_netdev", KEY_DISCARD), FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD), FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_DISCARD), FUSE_OPT_KEY("users", KEY_DISCARD),
	FUSE_OPT_KEY("nouser", KEY_DISCARD), FUSE_OPT_KEY("defaults", KEY_DISCARD), FUSE_OPT_END};

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct mount_opts *mo = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (mo->nonopt_count >= 2) {
			fprintf(stderr, "rdmafs-fuse: too many arguments: %s\n", arg);
			return -1;
		}
		mo->nonopt[mo->nonopt_count] = strdup(arg);
		if (!mo->nonopt[mo->nonopt_count])
			return -1;
		mo->nonopt_count++;
		return 0;
	case KEY_HELP:
		mo->help = 1;
		return 1; /* libfuse prints its part too */
	case KEY_DISCARD:
		return 0;
	default:
		return 1;
	}
}

static void usage(const char *prog)
{
	printf("usage: %s [options] [SOURCE] MOUNTPOINT\n"
	       "\n"
	       "rdmafs options (-o):\n"
	       "    meta=URI               metadata service: tcp://host:port, rdma://host:port\n"
	       "                           (or give it as SOURCE)\n"
	       "    secret=FILE            cluster secret file [%s]\n"
	       "    key=FILE               a client key instead of the secret (rdmafsctl client\n"
	       "                           add) [$RDMAFS_KEY_FILE, key_file in the settings]\n"
	       "    transport=auto|rdma|tcp  how to reach the storage daemons [auto]\n"
	       "    config=FILE            client settings: [client] meta, secret_file,\n"
	       "                           transport [$RDMAFS_CLIENT_CONF, %s]\n"
	       "    timeout=MS             per-RPC timeout [5000]\n"
	       "    readahead=KB           kernel read-ahead, set as root; 0: leave it [1024]\n"
	       "    write_behind=N         writes of a file answered before their daemons\n"
	       "                           (errors come with the next write, fsync or\n"
	       "                           close); 0: every write waits [8]\n"
	       "    busy_poll_us=N         poll for an answer this long before sleeping\n"
	       "                           (0..%u); 0: never spin [100]\n"
	       "    attr_timeout=SEC       kernel attribute cache [1.0]\n"
	       "    entry_timeout=SEC      kernel name cache [1.0]\n"
	       "    negative_timeout=SEC   kernel cache of names that do not exist (another\n"
	       "                           mount's new file shows after it) [entry_timeout]\n"
	       "    server_permissions     no default_permissions: only the service checks\n"
	       "                           (names the kernel has cached are then not checked)\n"
	       "    async_dirops           answer an unlink once the kernel's checks pass and\n"
	       "                           send it in the background (a failure comes with\n"
	       "                           the next fsync of the directory; not with\n"
	       "                           server_permissions)\n"
	       "    log=FILE               append the log to FILE [stderr in the foreground,\n"
	       "                           syslog (LOG_DAEMON; the journal) in the background]\n"
	       "    log_level=LEVEL        debug, info, warning or error [info]; also\n"
	       "                           --log-level LEVEL\n"
	       "    metrics=HOST:PORT      serve Prometheus metrics at\n"
	       "                           http://HOST:PORT/metrics (port 0: any free port)\n"
	       "    metrics_port_file=FILE write the port bound there\n"
	       "    ro                     read-only mount\n"
	       "\n"
	       "-V, --version              print \"rdmafs-fuse VERSION\" and exit\n"
	       "\n"
	       "Options win over RDMAFS_META and RDMAFS_SECRET_FILE, which win over the\n"
	       "settings file ([client]; metrics and metrics_port_file in [rdmafs-fuse]).\n"
	       "\n",
	       prog, rfs_default_secret_file(), rfs_client_conf_path(), XPRT_BUSY_POLL_MAX_US);
}

/*
 * A SOURCE from mount(8) names the metadata service when it is a URI
 * ("tcp://h:p", "rdmafs#tcp://h:p"); anything else ("rdmafs") is a label.
 */
static const char *source_uri(const char *source)
{
	const char *hash = strchr(source, '#');

	if (hash)
		source = hash + 1;
	return strstr(source, "://") ? source : NULL;
}

static int parse_transport(const char *s, enum rfs_transport *out)
{
	if (!s || strcmp(s, "auto") == 0)
		*out = RFS_TRANSPORT_AUTO;
	else if (strcmp(s, "rdma") == 0)
		*out = RFS_TRANSPORT_RDMA;
	else if (strcmp(s, "tcp") == 0)
		*out = RFS_TRANSPORT_TCP;
	else
		return -EINVAL;
	return 0;
}

static bool has_subtype(const struct fuse_args *args)
{
	for (int i = 0; i < args->argc; i++)
		if (strstr(args->argv[i], "subtype="))
			return true;
	return false;
}

static int parse_ms(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!s)
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 100 || v > 600000)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* What client.conf's [rdmafs-fuse] section set. */
struct fuse_conf {
	char *metrics;
	char *metrics_port_file;
};

static int fuse_conf_key(void *arg, const char *key, const char *value, char *why, size_t why_len)
{
	struct fuse_conf *fc = arg;
	char **slot;

	if (strcmp(key, "metrics") == 0) {
		if (*value && mount_metrics_check(value, why, why_len))
			return -EINVAL;
		slot = &fc->metrics;
	} else if (strcmp(key, "metrics_port_file") == 0) {
		slot = &fc->metrics_port_file;
	} else {
		return -ENOENT;
	}
	free(*slot);
	*slot = strdup(value);
	return *slot ? 0 : -ENOMEM;
}

/*
 * @path made absolute (malloc()ed), for a file written after
 * fuse_daemonize() changed the directory to /. NULL when out of memory.
 */
static char *absolute_path(const char *path)
{
	char cwd[PATH_MAX], *out;

	if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return strdup(path);
	if (asprintf(&out, "%s/%s", cwd, path) < 0)
		return NULL;
	return out;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void mountinfo_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * Whether an rdmafs mount (fstype fuse.rdmafs, or fuse.rdmafs-fuse from
 * versions that did not set the subtype) sits on @mountpoint; its source
 * goes to @source.
 */
static bool rdmafs_mounted_at(const char *mountpoint, char *source, size_t len)
{
	char path[PATH_MAX], *line = NULL;
	size_t cap = 0;
	bool found = false;
	FILE *f;

	if (!realpath(mountpoint, path))
		return false;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
	while (!found && getline(&line, &cap, f) > 0) {
		char *fields[5], *save = NULL, *dash = strstr(line, " - "), *type, *src;
		size_t n = 0;

		if (!dash)
			continue;
		*dash = '\0';
		for (char *t = strtok_r(line, " ", &save); t && n < 5;
		     t = strtok_r(NULL, " ", &save))
			fields[n++] = t;
		type = strtok_r(dash + 3, " \n", &save);
		src = strtok_r(NULL, " \n", &save);
		if (n < 5 || !type ||
		    (strcmp(type, "fuse.rdmafs") != 0 && strcmp(type, "fuse.rdmafs-fuse") != 0))
			continue;
		mountinfo_unescape(fields[4]);
		if (strcmp(fields[4], path) != 0)
			continue;
		found = true;
		if (src)
			mountinfo_unescape(src);
		snprintf(source, len, "%s", src ? src : "?");
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * Connects to the cluster once and says why it could not. A mount that goes
 * to the background (@in_child) probes in a child process: the transport
 * must not start before fuse_daemonize() forks (librdmacm keeps the RDMA
 * device contexts it opened for the life of the process, and the forked
 * daemon could not post on verbs it inherited). Returns 0 or -1.
 */
static int probe_cluster(const struct rfs_options *ro, const char *key_name, bool in_child)
{
	char why[256];
	struct rfs *probe;
	pid_t pid = in_child ? fork() : 0;
	int err, status;

	if (pid < 0) {
		fprintf(stderr, "rdmafs-fuse: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid > 0) {
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				return -1;
		return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
	}
	err = rfs_create(ro, &probe);
	if (err)
		fprintf(stderr, "rdmafs-fuse: cannot reach the cluster at %s: %s\n", ro->meta_uri,
			rdmafs_auth_strerror(err, key_name[0] ? key_name : NULL, why, sizeof(why)));
	else
		rfs_destroy(probe);
	if (in_child)
		_exit(err ? 1 : 0);
	return err ? -1 : 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct mount_opts mo = {.attr_timeout = 1.0,
				.entry_timeout = 1.0,
				.negative_timeout = -1.0, /* entry_timeout's */
				.write_behind = -1,	  /* the library's default */
				.busy_poll_us = INT_MIN,  /* the library's default */
				.readahead_kb = 1024};
	struct fuse_cmdline_opts cmd = {0};
	struct fuse_loop_config *loop_cfg = NULL;
	struct rfs_options ro;
	struct fs *fs = NULL;
	uint8_t *secret = NULL;
	size_t secret_len = 0;
	const char *meta_uri = NULL, *secret_file, *key_file, *env;
	char key_name[65] = "";
	struct rfs_client_conf conf = {0};
	struct fuse_conf fconf = {0};
	const char *metrics_listen;
	char *metrics_port_file = NULL;
	struct mount_metrics *metrics = NULL;
	enum rdmafs_log_level log_level;
	char why[1024];
	int ret = 1, err;

	rdmafs_log_init("rdmafs-fuse", RDMAFS_LOG_INFO);
	rfs_options_init(&ro);
	if (fuse_opt_parse(&args, &mo, mount_spec, opt_proc) == -1)
		goto out_free_args;
	if (mo.help) {
		usage(argv[0]);
		fuse_cmdline_help();
		fuse_lowlevel_help();
		ret = 0;
		goto out_free_args;
	}
	/* the mount point goes back for fuse_parse_cmdline(); a first argument is the source */
	if (mo.nonopt_count == 2) {
		meta_uri = source_uri(mo.nonopt[0]);
		/* show the source in /proc/mounts and df, as other filesystems do */
		if (!strchr(mo.nonopt[0], ',') && strlen(mo.nonopt[0]) < 512) {
			char opt[600];

			snprintf(opt, sizeof(opt), "-ofsname=%s", mo.nonopt[0]);
			if (fuse_opt_add_arg(&args, opt) == -1)
				goto out_free_args;
		}
	}
	if (mo.nonopt_count >= 1 && fuse_opt_add_arg(&args, mo.nonopt[mo.nonopt_count - 1]) == -1)
		goto out_free_args;
	/* fstype fuse.rdmafs, as the mount helper gives, unless the command line names one */
	if (!has_subtype(&args) && fuse_opt_add_arg(&args, "-osubtype=rdmafs") == -1)
		goto out_free_args;
	if (mo.meta)
		meta_uri = mo.meta;
	/*
	 * The service checks every request, but a path walk through names the
	 * kernel has cached asks nobody: without default_permissions a user could
	 * stat through a directory it may not search. The kernel checks with the
	 * cached attributes, the service again on every request it gets.
	 */
	if (!mo.server_permissions && fuse_opt_add_arg(&args, "-odefault_permissions") == -1)
		goto out_free_args;
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out_free_args;
	if (cmd.show_version) {
		/* one line, PROGRAM VERSION, as every rdmafs program prints it */
		printf("rdmafs-fuse %s\n", RDMAFS_VERSION);
		ret = 0;
		goto out_free_cmd;
	}
	/* client.conf under the environment under the options */
	err = rfs_client_conf_load(mo.config ? mo.config : rfs_client_conf_path(),
				   mo.config != NULL, "rdmafs-fuse", fuse_conf_key, &fconf, &conf,
				   why, sizeof(why));
	if (err) {
		fprintf(stderr, "rdmafs-fuse: %s\n", why);
		goto out_free_cmd;
	}
	/* metrics: the option over [rdmafs-fuse]'s; an empty one turns them off */
	metrics_listen = mo.metrics ? mo.metrics : fconf.metrics;
	if (metrics_listen && !*metrics_listen)
		metrics_listen = NULL;
	if (metrics_listen && mount_metrics_check(metrics_listen, why, sizeof(why))) {
		fprintf(stderr, "rdmafs-fuse: metrics=%s\n", why);
		goto out_free_cmd;
	}
	if (metrics_listen && (mo.metrics_port_file || fconf.metrics_port_file)) {
		metrics_port_file = absolute_path(mo.metrics_port_file ? mo.metrics_port_file
								       : fconf.metrics_port_file);
		if (!metrics_port_file)
			goto out_free_cmd;
	}
	env = getenv("RDMAFS_META");
	if (!meta_uri)
		meta_uri = env && *env ? env : conf.meta_uri;
	env = getenv("RDMAFS_SECRET_FILE");
	secret_file = mo.secret		 ? mo.secret
		      : env && *env	 ? env
		      : conf.secret_file ? conf.secret_file
					 : rfs_default_secret_file();
	if (!cmd.mountpoint || !meta_uri) {
		usage(argv[0]);
		fprintf(stderr, "rdmafs-fuse: %s\n",
			!cmd.mountpoint ? "no mount point"
					: "no metadata service: -o meta=URI, RDMAFS_META or meta = "
					  "URI in the settings file");
		goto out_free_cmd;
	}
	if (parse_transport(mo.transport ? mo.transport : conf.transport, &ro.transport) ||
	    parse_ms(mo.timeout, &ro.call_timeout_ms) || mo.attr_timeout < 0 ||
	    mo.entry_timeout < 0 || (mo.negative_timeout < 0 && mo.negative_timeout != -1.0) ||
	    mo.write_behind < -1 || mo.write_behind > WRITE_BEHIND_MAX ||
	    (mo.busy_poll_us != INT_MIN &&
	     (mo.busy_poll_us < 0 || mo.busy_poll_us > (int)XPRT_BUSY_POLL_MAX_US))) {
		fprintf(stderr,
			"rdmafs-fuse: bad option value (transport, timeout, *_timeout,"
			" write_behind 0 to %d or busy_poll_us 0 to %u)\n",
			WRITE_BEHIND_MAX, XPRT_BUSY_POLL_MAX_US);
		goto out_free_cmd;
	}
	if (mo.async_dirops && mo.server_permissions) {
		/* the kernel's own checks are what a background unlink is answered on */
		fprintf(stderr, "rdmafs-fuse: async_dirops needs the kernel's permission checks:"
				" not with server_permissions\n");
		goto out_free_cmd;
	}
	if (mo.log_level) {
		/* fuse_opt's "--log-level %s" hands --log-level=LEVEL over as "=LEVEL" */
		const char *level = mo.log_level[0] == '=' ? mo.log_level + 1 : mo.log_level;

		if (rdmafs_log_parse_level(level, &log_level)) {
			fprintf(stderr,
				"rdmafs-fuse: log_level takes debug, info, warning or error, not "
				"'%s'\n",
				mo.log_level);
			goto out_free_cmd;
		}
		rdmafs_log_set_level(log_level);
	}
	/* opened here, in the foreground: an error reaches the terminal, a relative path works */
	if (mo.log_file) {
		err = rdmafs_log_to_file(mo.log_file);
		if (err) {
			fprintf(stderr, "rdmafs-fuse: cannot open the log file %s: %s\n",
				mo.log_file, strerror(-err));
			goto out_free_cmd;
		}
	}
	rdmafs_log_hook_xprt();
	/* a key from anywhere is used, unless -o secret= asks for the secret */
	env = getenv("RDMAFS_KEY_FILE");
	key_file = mo.key ? mo.key : mo.secret ? NULL : env && *env ? env : conf.key_file;
	if (key_file) {
		err = rdmafs_key_file_name(key_file, key_name, sizeof(key_name));
		if (err) {
			fprintf(stderr, "rdmafs-fuse: %s\n",
				rdmafs_key_strerror(key_file, err, why, sizeof(why)));
			goto out_free_cmd;
		}
		ro.key_file = key_file;
	} else {
		err = rdmafs_read_secret(secret_file, &secret, &secret_len);
		if (err) {
			fprintf(stderr, "rdmafs-fuse: %s\n",
				rdmafs_secret_strerror(secret_file, err, why, sizeof(why)));
			goto out_free_cmd;
		}
	}
	if (mo.write_behind >= 0)
		ro.write_behind = (unsigned)mo.write_behind;
	if (mo.busy_poll_us != INT_MIN)
		ro.busy_poll_us = mo.busy_poll_us;
	ro.meta_uri = meta_uri;
	ro.secret = secret;
	ro.secret_len = secret_len;

	/* a second rdmafs on the same mount point would hide the first one's files */
	if (rdmafs_mounted_at(cmd.mountpoint, why, sizeof(why))) {
		fprintf(stderr,
			"rdmafs-fuse: %s is already an rdmafs mount (of %s); unmount it first "
			"(umount %s)\n",
			cmd.mountpoint, why, cmd.mountpoint);
		goto out_free_secret;
	}
	/* connect once before mounting, so a wrong address or secret fails here, not later */
	if (probe_cluster(&ro, key_name, !cmd.foreground))
		goto out_free_secret;

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		goto out_free_secret;
	fs->attr_timeout = mo.attr_timeout;
	fs->kernel_acl = !mo.server_permissions;
	fs->entry_timeout = mo.entry_timeout;
	fs->negative_timeout = mo.negative_timeout < 0 ? mo.entry_timeout : mo.negative_timeout;
	fs->readahead_kb = mo.readahead_kb;
	pthread_mutex_init(&fs->table_lock, NULL);
	if (!node_ref(fs, FUSE_ROOT_ID, 1, 0))
		goto out_free_fs;

	fs->se = fuse_session_new(&args, &mount_ops, sizeof(mount_ops), fs);
	if (!fs->se)
		goto out_free_fs;
	if (fuse_set_signal_handlers(fs->se) != 0)
		goto out_destroy_session;
	if (fuse_session_mount(fs->se, cmd.mountpoint) != 0)
		goto out_remove_handlers;
	readahead_find_bdi(fs, cmd.mountpoint);
	/* fork before the transport starts threads and registers memory */
	fuse_daemonize(cmd.foreground);
	/* in the background stderr is /dev/null now */
	if (!cmd.foreground && !mo.log_file)
		rdmafs_log_to_syslog();
	err = rfs_create(&ro, &fs->rfs);
	if (err) {
		rdmafs_log(RDMAFS_LOG_WARN, "cannot reach the cluster at %s: %s", meta_uri,
			   strerror(-err));
		goto out_unmount;
	}
	if (mo.async_dirops) {
		err = ops_bg_start(fs);
		if (err) {
			rdmafs_log(RDMAFS_LOG_ERR, "async_dirops: cannot start its threads: %s",
				   strerror(-err));
			goto out_destroy_rfs;
		}
	}
	rdmafs_log(RDMAFS_LOG_INFO, "mounted %s (metadata service %s%s)", cmd.mountpoint, meta_uri,
		   mo.async_dirops ? ", async_dirops" : "");
	if (metrics_listen) {
		struct mount_metrics_params mp = {
			.listen = metrics_listen,
			.port_file = metrics_port_file,
			.mountpoint = cmd.mountpoint,
			.meta_uri = meta_uri,
		};

		/* the filesystem matters more than its monitoring: it stays mounted */
		if (mount_metrics_start(fs, &mp, &metrics))
			rdmafs_log(RDMAFS_LOG_ERR, "%s: serving no metrics (metrics=%s)",
				   cmd.mountpoint, metrics_listen);
	}
	if (cmd.singlethread) {
		ret = fuse_session_loop(fs->se);
	} else {
		loop_cfg = fuse_loop_cfg_create();
		if (!loop_cfg)
			goto out_stop_metrics;
		fuse_loop_cfg_set_clone_fd(loop_cfg, cmd.clone_fd);
		if (cmd.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(loop_cfg, cmd.max_idle_threads);
		fuse_loop_cfg_set_max_threads(loop_cfg, cmd.max_threads);
		ret = fuse_session_loop_mt(fs->se, loop_cfg);
		fuse_loop_cfg_destroy(loop_cfg);
	}
	ret = ret ? 1 : 0;
	rdmafs_log(ret ? RDMAFS_LOG_WARN : RDMAFS_LOG_INFO, "the FUSE session of %s ended%s",
		   cmd.mountpoint, ret ? " with an error" : "");
out_stop_metrics:
	mount_metrics_stop(metrics);
	/* the unlinks answered are sent before the connection goes */
	bg_stop(fs);
out_destroy_rfs:
	rfs_destroy(fs->rfs);
out_unmount:
	fuse_session_unmount(fs->se);
out_remove_handlers:
	fuse_remove_signal_handlers(fs->se);
out_destroy_session:
	fuse_session_destroy(fs->se);
out_free_fs:
	for (unsigned b = 0; b < NODE_BUCKETS; b++) {
		while (fs->buckets[b]) {
			struct node *n = fs->buckets[b];

			fs->buckets[b] = n->next;
			pthread_mutex_destroy(&n->lock);
			free(n);
		}
	}
	pthread_mutex_destroy(&fs->table_lock);
	free(fs);
out_free_secret:
	if (secret)
		memset(secret, 0, secret_len);
	free(secret);
out_free_cmd:
	free(cmd.mountpoint);
	free(metrics_port_file);
	free(fconf.metrics);
	free(fconf.metrics_port_file);
	rfs_client_conf_free(&conf);
out_free_args:
	for (int i = 0; i < mo.nonopt_count; i++)
		free(mo.nonopt[i]);
	free(mo.meta);
	free(mo.secret);
	free(mo.key);
	free(mo.transport);
	free(mo.timeout);
	free(mo.log_file);
	free(mo.log_level);
	free(mo.config);
	free(mo.metrics);
	free(mo.metrics_port_file);
	fuse_opt_free_args(&args);
	return ret;
}
