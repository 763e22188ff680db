//! A real six-node Redis Cluster (three masters, three replicas) on loopback ports.

use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::server::Mode;
use crate::{HarnessError, RedisServer, cli};

/// Nodes in a cluster: three masters, each with one replica.
const NODES: usize = 6;

/// Replicas per master, as given to `redis-cli --cluster create`.
const REPLICAS_PER_MASTER: usize = 1;

/// Hash slots in a Redis Cluster.
const SLOTS: u32 = 16_384;

/// How long `redis-cli --cluster create` may take.
const CREATE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a new cluster gets to become healthy.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the cluster is inspected while waiting.
const READY_POLL: Duration = Duration::from_millis(100);

/// How long one inspection command may take.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How many log lines per node an error message shows.
const NODE_LOG_LINES: usize = 15;

/// A Redis Cluster of six real `redis-server` nodes — three masters, three replicas — that this
/// harness started and will stop.
///
/// [`start`](Self::start) starts six cluster-enabled [`RedisServer`]s, joins them with
/// `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes` and waits until the
/// cluster is healthy (see [`wait_until_ok`](Self::wait_until_ok)). The node timeout is
/// [`NODE_TIMEOUT`](Self::NODE_TIMEOUT) (2 s), so a killed master is replaced within seconds.
/// The nodes run with `cluster-require-full-coverage no`, as a limiter's cluster should: while a
/// master is down only its own slots stop answering, not the whole cluster.
/// Dropping the value kills every node.
///
/// Starting a cluster takes a few seconds; a test binary whose tests only read and write
/// should share one through [`shared`](Self::shared). A test that kills, pauses or restarts
/// nodes should start its own, so it does not pull the floor from under the others.
///
/// ```no_run
/// use tollgate_redis_harness::RedisCluster;
///
/// let cluster = RedisCluster::start()?;
/// let urls = cluster.urls(); // for redis::cluster::ClusterClient::new(urls)
/// assert_eq!(urls.len(), 6);
///
/// // Failover: kill a master, wait until its replica has taken over.
/// let killed = cluster.kill_master(0)?;
/// cluster.wait_until_ok(std::time::Duration::from_secs(30))?;
/// assert!(cluster.masters()?.iter().all(|m| m.port() != killed.port()));
/// # Ok::<(), tollgate_redis_harness::HarnessError>(())
/// ```
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// The shared cluster of this process; see [`RedisCluster::shared`].
static SHARED: OnceLock<Result<RedisCluster, HarnessError>> = OnceLock::new();

impl RedisCluster {
    /// How long a node may be silent before the others consider it failed and promote its
    /// replica (the nodes' `cluster-node-timeout`).
    pub const NODE_TIMEOUT: Duration = Duration::from_secs(2);

    /// Starts six cluster nodes with `redis-server` from `PATH`, creates the cluster and waits
    /// until it is healthy.
    ///
    /// # Errors
    ///
    /// * any error of [`RedisServer::start`] (not installed, a node that does not start);
    /// * [`is_cluster`](HarnessError::is_cluster) — `redis-cli --cluster create` failed; the
    ///   message holds its output and the tail of every node's log;
    /// * [`is_timeout`](HarnessError::is_timeout) — the cluster did not become healthy within
    ///   30 seconds; the message says what was missing, where, and shows the logs.
    pub fn start() -> Result<Self, HarnessError> {
        Self::start_with("redis-server")
    }

    /// Like [`start`](Self::start), with another `redis-server` binary (a name on `PATH` or a
    /// path).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with(binary: &str) -> Result<Self, HarnessError> {
        let mode = Mode::ClusterNode {
            node_timeout: Self::NODE_TIMEOUT,
        };
        let nodes = (0..NODES)
            .map(|_| RedisServer::launch(binary, mode))
            .collect::<Result<Vec<_>, _>>()?;
        let cluster = Self { nodes };
        cluster.create()?;
        cluster.wait_until_ok(READY_TIMEOUT)?;
        Ok(cluster)
    }

    /// The cluster this test binary shares, started on first use.
    ///
    /// Every test in the binary gets the same cluster, so it starts once per binary however
    /// the tests are scheduled. Tests that share it must use their own keys and must not kill,
    /// pause or restart its nodes.
    ///
    /// A static is never dropped, so `Drop` does not stop these nodes; each node's watchdog does
    /// (see the crate docs): when the test process exits, however it exits, the nodes are killed
    /// and their temp dirs removed.
    ///
    /// # Errors
    ///
    /// The error of the first start, returned again to every later caller (the start is not
    /// retried, so a broken machine fails each test fast and with the same message).
    pub fn shared() -> Result<&'static Self, HarnessError> {
        SHARED
            .get_or_init(Self::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The six nodes, in start order (not role order: see [`masters`](Self::masters)).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Every node's URL (`redis://127.0.0.1:PORT/`), as a cluster client's initial nodes.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The masters now serving slots, ordered by the first slot each serves (so `masters()[0]`
    /// holds slot 0).
    ///
    /// Asks the first node that is running and not paused for `CLUSTER NODES`; a master that
    /// node considers failing (`fail` or `fail?`) is left out.
    ///
    /// # Errors
    ///
    /// [`is_cluster`](HarnessError::is_cluster) if no live node answered or the answer could
    /// not be read.
    pub fn masters(&self) -> Result<Vec<&RedisServer>, HarnessError> {
        self.by_role(true)
    }

    /// The replicas in the cluster's current view, in the order of their masters
    /// (see [`masters`](Self::masters)); a failing one is left out.
    ///
    /// # Errors
    ///
    /// As [`masters`](Self::masters).
    pub fn replicas(&self) -> Result<Vec<&RedisServer>, HarnessError> {
        self.by_role(false)
    }

    /// The master now serving `slot` (as the first live node sees it), for tests that pause or
    /// migrate the node behind one key.
    ///
    /// # Errors
    ///
    /// As [`masters`](Self::masters), and [`is_cluster`](HarnessError::is_cluster) if no
    /// live master serves the slot.
    pub fn master_of(&self, slot: u16) -> Result<&RedisServer, HarnessError> {
        let view = self.any_view()?;
        let slot = u32::from(slot);
        view.iter()
            .filter(|line| line.is_master && !line.failing)
            .find(|line| {
                line.slots
                    .iter()
                    .any(|(from, to)| (*from..=*to).contains(&slot))
            })
            .and_then(|line| self.nodes.iter().find(|node| node.port() == line.port))
            .ok_or_else(|| HarnessError::cluster(format!("no live master serves slot {slot}")))
    }

    /// Kills the `index`-th master (in [`masters`](Self::masters) order) and returns it.
    ///
    /// The other nodes notice after [`NODE_TIMEOUT`](Self::NODE_TIMEOUT) and promote its
    /// replica; call [`wait_until_ok`](Self::wait_until_ok) to wait for that. The killed node
    /// can be brought back with [`RedisServer::restart`]; it rejoins as a replica.
    ///
    /// # Errors
    ///
    /// As [`masters`](Self::masters), and [`is_cluster`](HarnessError::is_cluster) if there is
    /// no `index`-th master.
    pub fn kill_master(&self, index: usize) -> Result<&RedisServer, HarnessError> {
        let masters = self.masters()?;
        let count = masters.len();
        let master = masters.into_iter().nth(index).ok_or_else(|| {
            HarnessError::cluster(format!("no master #{index}: the cluster has {count}"))
        })?;
        master.kill()?;
        Ok(master)
    }

    /// Waits until the cluster is healthy as seen from every live node (running, not paused),
    /// or `timeout` passes.
    ///
    /// Healthy means, on each live node: `cluster_state:ok`, all 16384 slots assigned, all six
    /// nodes known; in its `CLUSTER NODES`, every slot served by a master that is live and not
    /// flagged failing, and every live node seen, not flagged failing, and either a master
    /// serving slots or a replica; and, on a replica, `master_link_status:up`. So the three
    /// masters and three replicas are settled, as every node sees them. Because the harness
    /// knows which nodes it killed or paused, this also waits out a failover that the nodes have
    /// not noticed yet.
    ///
    /// # Errors
    ///
    /// [`is_timeout`](HarnessError::is_timeout), saying what was still missing on which node,
    /// with the tail of every node's log.
    pub fn wait_until_ok(&self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let problems = self.health_problems();
            if problems.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let error = HarnessError::timeout(format!(
                    "the Redis Cluster did not become healthy within {timeout:?}:\n  {}",
                    problems.join("\n  ")
                ));
                return Err(self.with_logs(error));
            }
            thread::sleep(READY_POLL);
        }
    }

    /// Joins the nodes: `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`.
    fn create(&self) -> Result<(), HarnessError> {
        let mut args = vec!["--cluster".to_owned(), "create".to_owned()];
        args.extend(
            self.nodes
                .iter()
                .map(|node| format!("127.0.0.1:{}", node.port())),
        );
        args.extend([
            "--cluster-replicas".to_owned(),
            REPLICAS_PER_MASTER.to_string(),
            "--cluster-yes".to_owned(),
        ]);
        let output = match cli::run(cli::REDIS_CLI, &args, CREATE_TIMEOUT) {
            Ok(output) => output,
            Err(error) if error.is_not_installed() => return Err(error),
            Err(error) => return Err(self.with_logs(error)),
        };
        if output.status.success() && output.stdout.contains("All 16384 slots covered") {
            return Ok(());
        }
        let error = HarnessError::cluster(format!(
            "`redis-cli {}` failed ({})",
            args.join(" "),
            output.status
        ))
        .with_section(
            "redis-cli --cluster create output",
            &format!("{}{}", output.stdout, output.stderr),
        );
        Err(self.with_logs(error))
    }

    /// Everything that keeps the cluster from being healthy now; empty when it is.
    fn health_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for node in self.live_nodes() {
            let port = node.port();
            let info = match node.cli_with_timeout(&["cluster", "info"], INSPECT_TIMEOUT) {
                Ok(info) => info,
                Err(error) => {
                    problems.push(format!("{port}: CLUSTER INFO failed: {error}"));
                    continue;
                }
            };
            for (field, wanted) in [
                ("cluster_state", "ok".to_owned()),
                ("cluster_slots_assigned", SLOTS.to_string()),
                ("cluster_known_nodes", NODES.to_string()),
            ] {
                let found = info_field(&info, field).unwrap_or("(missing)");
                if found != wanted {
                    problems.push(format!("{port}: {field} is {found}, want {wanted}"));
                }
            }
            match view_from(node) {
                Ok(view) => problems.extend(self.view_problems(port, &view)),
                Err(error) => problems.push(format!("{port}: {error}")),
            }
            match node.cli_with_timeout(&["info", "replication"], INSPECT_TIMEOUT) {
                Ok(replication) => {
                    if info_field(&replication, "role") == Some("slave") {
                        let link = info_field(&replication, "master_link_status");
                        if link != Some("up") {
                            let link = link.unwrap_or("(missing)");
                            problems.push(format!("{port}: replica link is {link}, want up"));
                        }
                    }
                }
                Err(error) => problems.push(format!("{port}: INFO replication failed: {error}")),
            }
        }
        problems
    }

    /// What, in the `view` of the node on `port`, is not yet as it should be: every slot served
    /// by a live master not flagged failing; every live node present, not flagged failing, and
    /// either a master serving slots or a replica (a replica set up by `--cluster create`, or a
    /// restarted old master, shows as a master without slots until the news has spread).
    fn view_problems(&self, port: u16, view: &[NodeLine]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut served = 0;
        for master in view
            .iter()
            .filter(|line| line.is_master && !line.slots.is_empty())
        {
            let live = self.live_nodes().any(|node| node.port() == master.port);
            if master.failing || !live {
                problems.push(format!(
                    "{port}: sees master {} (down) still serving slots",
                    master.port
                ));
            } else {
                served += master.slot_count();
            }
        }
        if problems.is_empty() && served != SLOTS {
            problems.push(format!(
                "{port}: live masters serve {served} slots, want {SLOTS}"
            ));
        }
        for node in self.live_nodes() {
            match view.iter().find(|line| line.port == node.port()) {
                None => problems.push(format!("{port}: does not know node {}", node.port())),
                Some(line) if line.failing => {
                    problems.push(format!("{port}: sees live node {} as failing", line.port));
                }
                Some(line) if line.is_master && line.slots.is_empty() => problems.push(format!(
                    "{port}: sees node {} as a master without slots",
                    line.port
                )),
                Some(_) => {}
            }
        }
        problems
    }

    fn by_role(&self, masters: bool) -> Result<Vec<&RedisServer>, HarnessError> {
        let view = self.any_view()?;
        let order_of = |line: &NodeLine| {
            let master = if line.is_master {
                Some(line)
            } else {
                view.iter()
                    .find(|other| Some(&other.id) == line.master_id.as_ref())
            };
            master.and_then(NodeLine::first_slot).unwrap_or(u32::MAX)
        };
        let mut chosen: Vec<&NodeLine> = view
            .iter()
            .filter(|line| line.is_master == masters && !line.failing)
            .filter(|line| !masters || !line.slots.is_empty())
            .collect();
        chosen.sort_by_key(|line| order_of(line));
        Ok(chosen
            .into_iter()
            .filter_map(|line| self.nodes.iter().find(|node| node.port() == line.port))
            .collect())
    }

    /// `CLUSTER NODES` from the first live node that answers.
    fn any_view(&self) -> Result<Vec<NodeLine>, HarnessError> {
        let mut errors = Vec::new();
        for node in self.live_nodes() {
            match view_from(node) {
                Ok(view) => return Ok(view),
                Err(error) => errors.push(format!("{}: {error}", node.port())),
            }
        }
        Err(HarnessError::cluster(format!(
            "no live node answered CLUSTER NODES: [{}]",
            errors.join("; ")
        )))
    }

    /// Nodes whose process runs and is not paused: the ones that can answer.
    fn live_nodes(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes
            .iter()
            .filter(|node| node.is_running() && !node.is_paused())
    }

    fn with_logs(&self, mut error: HarnessError) -> HarnessError {
        for node in &self.nodes {
            error = error.with_section(
                &format!(
                    "redis-server log, cluster node 127.0.0.1:{}, last lines",
                    node.port()
                ),
                &node.log_tail(NODE_LOG_LINES),
            );
        }
        error
    }
}

/// `CLUSTER NODES` as `node` sees it.
fn view_from(node: &RedisServer) -> Result<Vec<NodeLine>, HarnessError> {
    let text = node.cli_with_timeout(&["cluster", "nodes"], INSPECT_TIMEOUT)?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            NodeLine::parse(line).ok_or_else(|| {
                HarnessError::cluster(format!("unreadable CLUSTER NODES line: {line}"))
            })
        })
        .collect()
}

/// The value of `field` in `INFO`-style `field:value` lines.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name == field).then(|| value.trim())
    })
}

/// One line of `CLUSTER NODES`:
/// `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`.
#[derive(Debug)]
struct NodeLine {
    id: String,
    port: u16,
    is_master: bool,
    /// Flagged `fail` or `fail?` (or not yet a proper member: `handshake`, `noaddr`).
    failing: bool,
    /// The master's id, for a replica.
    master_id: Option<String>,
    /// Served slot ranges, inclusive; migrating/importing markers (`[...]`) are skipped.
    slots: Vec<(u32, u32)>,
}

impl NodeLine {
    fn parse(line: &str) -> Option<Self> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (id, address, flags, master) = (
            fields.first()?,
            fields.get(1)?,
            fields.get(2)?,
            fields.get(3)?,
        );
        let host_port = address.split(['@', ',']).next()?;
        let port = host_port.rsplit_once(':')?.1.parse().ok()?;
        let flags: Vec<&str> = flags.split(',').collect();
        let slots = fields
            .iter()
            .skip(8)
            .filter(|slot| !slot.starts_with('['))
            .map(|slot| match slot.split_once('-') {
                Some((from, to)) => Some((from.parse().ok()?, to.parse().ok()?)),
                None => slot.parse().ok().map(|one| (one, one)),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            id: (*id).to_owned(),
            port,
            is_master: flags.contains(&"master"),
            failing: flags
                .iter()
                .any(|flag| matches!(*flag, "fail" | "fail?" | "handshake" | "noaddr")),
            master_id: (*master != "-").then(|| (*master).to_owned()),
            slots,
        })
    }

    fn first_slot(&self) -> Option<u32> {
        self.slots.iter().map(|(from, _)| *from).min()
    }

    fn slot_count(&self) -> u32 {
        self.slots.iter().map(|(from, to)| to - from + 1).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes_lines() {
        let master = NodeLine::parse(
            "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004 myself,master - 0 \
             1426238317239 4 connected 0-5460 5461 [5462->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]",
        )
        .unwrap();
        assert_eq!(master.port, 30004);
        assert!(master.is_master && !master.failing);
        assert_eq!(master.master_id, None);
        assert_eq!(master.slots, vec![(0, 5460), (5461, 5461)]);
        assert_eq!(master.slot_count(), 5462);
        assert_eq!(master.first_slot(), Some(0));

        let replica = NodeLine::parse(
            "6ec23923 127.0.0.1:30002@40002,host.example slave,fail? 07c37dfe 0 0 2 connected",
        )
        .unwrap();
        assert_eq!(replica.port, 30002);
        assert!(!replica.is_master && replica.failing);
        assert_eq!(replica.master_id.as_deref(), Some("07c37dfe"));
        assert!(replica.slots.is_empty());

        assert!(NodeLine::parse("garbage").is_none());
    }

    #[test]
    fn reads_info_fields() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_assigned"), Some("16384"));
        assert_eq!(info_field(info, "cluster_size"), None);
    }
}
