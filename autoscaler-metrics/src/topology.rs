//! The job graph: vertices, edges with ship strategies, sources, sinks and a topological order.

use crate::MetricsError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;

/// Identifier of a job vertex (the reference's `JobVertexID`; any non-empty string here).
///
/// Ordered, compared and hashed as its string. Vertex ids key most maps of a cycle, so each id
/// also carries its first 16 bytes as a number: two ids that differ there compare with one integer
/// comparison instead of a string comparison, and clones of one id compare equal by pointer.
#[derive(Clone)]
pub struct VertexId {
    /// The first 16 bytes of `id`, big-endian, zero-padded: ordered as the strings are wherever
    /// two keys differ (see [`VertexId::cmp`]).
    key: u128,
    id: Arc<str>,
}

impl VertexId {
    /// Wraps a string as a vertex id.
    pub fn new(id: impl AsRef<str>) -> Self {
        Self::from_arc(Arc::from(id.as_ref()))
    }

    fn from_arc(id: Arc<str>) -> Self {
        let mut head = [0u8; 16];
        let bytes = id.as_bytes();
        let n = bytes.len().min(16);
        head[..n].copy_from_slice(&bytes[..n]);
        Self {
            key: u128::from_be_bytes(head),
            id,
        }
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.id
    }
}

impl PartialEq for VertexId {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && (Arc::ptr_eq(&self.id, &other.id) || self.id == other.id)
    }
}

impl Eq for VertexId {}

impl PartialOrd for VertexId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for VertexId {
    /// The strings' order. Where the keys differ they decide it: the strings agree before the
    /// first byte where the keys differ, and there either both strings have a byte (the keys hold
    /// them) or the shorter one ended (its zero padding is below the other's byte, as a string
    /// that ended is below one that goes on). Equal keys leave it to the strings.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match self.key.cmp(&other.key) {
            std::cmp::Ordering::Equal if Arc::ptr_eq(&self.id, &other.id) => std::cmp::Ordering::Equal,
            std::cmp::Ordering::Equal => self.id.cmp(&other.id),
            unequal => unequal,
        }
    }
}

impl std::hash::Hash for VertexId {
    /// Hashes as its string does, so maps keyed by ids can be searched by `&str`.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state)
    }
}

impl Serialize for VertexId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id)
    }
}

impl<'de> Deserialize<'de> for VertexId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

impl fmt::Debug for VertexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.id, f)
    }
}

impl fmt::Display for VertexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

impl From<&str> for VertexId {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for VertexId {
    fn from(s: String) -> Self {
        Self::from_arc(Arc::from(s))
    }
}

impl std::borrow::Borrow<str> for VertexId {
    fn borrow(&self) -> &str {
        &self.id
    }
}

/// How records travel along an edge (Flink's ship strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum ShipStrategy {
    /// Key-partitioned.
    Hash,
    /// Round-robin to all downstream subtasks.
    Rebalance,
    /// Round-robin to a subset of downstream subtasks.
    Rescale,
    /// One-to-one.
    Forward,
    /// User-defined partitioner.
    Custom,
    /// Every record to every downstream subtask.
    Broadcast,
    /// Everything to one subtask.
    Global,
    /// Random.
    Shuffle,
    /// Anything else.
    Unknown,
}

impl ShipStrategy {
    /// Parses a ship strategy case-insensitively; any unrecognised string is [`ShipStrategy::Unknown`],
    /// as the reference's `ShipStrategy.of`.
    pub fn parse_lenient(s: &str) -> Self {
        // Compared in place: the collector reads every edge's strategy each cycle.
        const NAMES: [(&str, ShipStrategy); 8] = [
            ("HASH", ShipStrategy::Hash),
            ("REBALANCE", ShipStrategy::Rebalance),
            ("RESCALE", ShipStrategy::Rescale),
            ("FORWARD", ShipStrategy::Forward),
            ("CUSTOM", ShipStrategy::Custom),
            ("BROADCAST", ShipStrategy::Broadcast),
            ("GLOBAL", ShipStrategy::Global),
            ("SHUFFLE", ShipStrategy::Shuffle),
        ];
        let s = s.trim();
        NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s))
            .map_or(Self::Unknown, |&(_, strategy)| strategy)
    }
}

/// A vertex as declared by the caller (before it is placed in a [`JobTopology`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct VertexSpec {
    /// Vertex id.
    pub id: VertexId,
    /// Human-readable name (informational).
    pub name: Option<String>,
    /// Current parallelism.
    pub parallelism: u32,
    /// Max parallelism (number of key groups).
    pub max_parallelism: u32,
    /// Number of source partitions; 0 = unknown / not a source.
    pub num_source_partitions: u32,
    /// Whether the vertex is FINISHED.
    pub finished: bool,
    /// Slot sharing group id, if known.
    pub slot_sharing_group: Option<String>,
}

impl VertexSpec {
    /// A running vertex with the given parallelism and max parallelism and nothing else set.
    pub fn new(id: impl Into<VertexId>, parallelism: u32, max_parallelism: u32) -> Self {
        Self {
            id: id.into(),
            name: None,
            parallelism,
            max_parallelism,
            num_source_partitions: 0,
            finished: false,
            slot_sharing_group: None,
        }
    }

    /// The vertex with its human-readable `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The vertex with `partitions` source partitions (0 = unknown).
    pub fn with_source_partitions(mut self, partitions: u32) -> Self {
        self.num_source_partitions = partitions;
        self
    }

    /// The vertex, FINISHED when `finished`.
    pub fn with_finished(mut self, finished: bool) -> Self {
        self.finished = finished;
        self
    }

    /// The vertex in slot sharing group `group`.
    pub fn with_slot_sharing_group(mut self, group: impl Into<String>) -> Self {
        self.slot_sharing_group = Some(group.into());
        self
    }
}

/// An edge of the job graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeSpec {
    /// Upstream vertex.
    pub from: VertexId,
    /// Downstream vertex.
    pub to: VertexId,
    /// How records are shipped.
    pub ship_strategy: ShipStrategy,
}

impl EdgeSpec {
    /// An edge `from -> to`.
    pub fn new(from: impl Into<VertexId>, to: impl Into<VertexId>, ship_strategy: ShipStrategy) -> Self {
        Self {
            from: from.into(),
            to: to.into(),
            ship_strategy,
        }
    }
}

/// A vertex placed in a [`JobTopology`], with its inputs and outputs resolved to vertex indices.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexInfo {
    /// Vertex id.
    pub id: VertexId,
    /// Human-readable name.
    pub name: Option<String>,
    /// Current parallelism.
    pub parallelism: NonZeroU32,
    /// Max parallelism (number of key groups).
    pub max_parallelism: NonZeroU32,
    /// Number of source partitions; 0 = unknown.
    pub num_source_partitions: u32,
    /// Whether the vertex is FINISHED.
    pub finished: bool,
    /// Slot sharing group id.
    pub slot_sharing_group: Option<String>,
    /// Inputs as (vertex index, ship strategy), in declaration order.
    pub inputs: Vec<(usize, ShipStrategy)>,
    /// Outputs as (vertex index, ship strategy), in declaration order.
    pub outputs: Vec<(usize, ShipStrategy)>,
}

impl VertexInfo {
    /// Whether the vertex has no inputs.
    pub fn is_source(&self) -> bool {
        self.inputs.is_empty()
    }
}

/// A validated, acyclic job graph. Vertices keep their declaration order; indices into
/// [`JobTopology::vertices`] are stable for the topology's lifetime.
///
/// A topology is immutable once built, and cloning one shares it (a collector hands a cycle its
/// topology without copying the graph).
#[derive(Debug, Clone)]
pub struct JobTopology {
    graph: std::sync::Arc<Graph>,
}

/// The validated graph a [`JobTopology`] shares.
#[derive(Debug, PartialEq)]
struct Graph {
    vertices: Vec<VertexInfo>,
    /// Position of each id; foldhash, as a lookup per vertex and cycle is on the hot path and
    /// SipHash costs more than the rest of a lookup.
    index: HashMap<VertexId, usize, foldhash::fast::RandomState>,
    topological_order: Vec<usize>,
    /// Vertex indices in id order.
    id_order: Vec<usize>,
    /// The position of each vertex in `id_order`.
    id_rank: Vec<usize>,
}

impl JobTopology {
    /// Whether `other` is a clone of this topology (the same shared graph), without comparing
    /// the graphs: a cheap "unchanged" check for a caller that keeps the last topology it saw.
    /// Equal topologies built apart are not clones ([`PartialEq`] compares them).
    ///
    /// ```
    /// use autoscaler_metrics::{JobTopology, VertexSpec};
    /// let build = || JobTopology::new(vec![VertexSpec::new("a", 1, 128)], vec![]).expect("valid");
    /// let (topology, rebuilt) = (build(), build());
    /// assert!(topology.shares_graph_with(&topology.clone()));
    /// assert!(!topology.shares_graph_with(&rebuilt) && topology == rebuilt);
    /// ```
    pub fn shares_graph_with(&self, other: &JobTopology) -> bool {
        std::sync::Arc::ptr_eq(&self.graph, &other.graph)
    }
}

impl PartialEq for JobTopology {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.graph, &other.graph) || self.graph == other.graph
    }
}

impl JobTopology {
    /// Builds a topology, rejecting duplicate ids, zero parallelism, parallelism above max
    /// parallelism, edges to unknown vertices, duplicate edges and cycles.
    pub fn new(vertices: Vec<VertexSpec>, edges: Vec<EdgeSpec>) -> Result<Self, MetricsError> {
        for v in &vertices {
            if v.parallelism > v.max_parallelism {
                return Err(MetricsError::ParallelismAboveMax {
                    vertex: v.id.clone(),
                    parallelism: v.parallelism,
                    max_parallelism: v.max_parallelism,
                });
            }
        }
        Self::new_lenient(vertices, edges)
    }

    /// Like [`JobTopology::new`] but accepts a parallelism above the max parallelism, as the
    /// reference does (its vertex scaler caps the new parallelism at max parallelism).
    pub fn new_lenient(vertices: Vec<VertexSpec>, edges: Vec<EdgeSpec>) -> Result<Self, MetricsError> {
        let mut index = HashMap::with_capacity_and_hasher(vertices.len(), foldhash::fast::RandomState::default());
        let mut infos = Vec::with_capacity(vertices.len());
        if vertices.is_empty() {
            return Err(MetricsError::EmptyTopology);
        }
        for (i, v) in vertices.into_iter().enumerate() {
            if v.id.as_str().is_empty() {
                return Err(MetricsError::EmptyVertexId);
            }
            let parallelism =
                NonZeroU32::new(v.parallelism).ok_or_else(|| MetricsError::ZeroParallelism { vertex: v.id.clone() })?;
            let max_parallelism = NonZeroU32::new(v.max_parallelism)
                .ok_or_else(|| MetricsError::ZeroMaxParallelism { vertex: v.id.clone() })?;
            if index.insert(v.id.clone(), i).is_some() {
                return Err(MetricsError::DuplicateVertex { vertex: v.id });
            }
            infos.push(VertexInfo {
                id: v.id,
                name: v.name,
                parallelism,
                max_parallelism,
                num_source_partitions: v.num_source_partitions,
                finished: v.finished,
                slot_sharing_group: v.slot_sharing_group,
                inputs: Vec::new(),
                outputs: Vec::new(),
            });
        }
        for e in edges {
            let from = *index.get(&e.from).ok_or_else(|| MetricsError::UnknownVertex {
                vertex: e.from.clone(),
                context: "edge source",
            })?;
            let to = *index.get(&e.to).ok_or_else(|| MetricsError::UnknownVertex {
                vertex: e.to.clone(),
                context: "edge target",
            })?;
            if infos[to].inputs.iter().any(|(u, _)| *u == from) {
                return Err(MetricsError::DuplicateEdge { from: e.from, to: e.to });
            }
            infos[to].inputs.push((from, e.ship_strategy));
            infos[from].outputs.push((to, e.ship_strategy));
        }
        let topological_order = kahn_order(&infos)?;
        let mut id_order: Vec<usize> = (0..infos.len()).collect();
        id_order.sort_unstable_by(|&a, &b| infos[a].id.cmp(&infos[b].id));
        let mut id_rank = vec![0; infos.len()];
        for (rank, &v) in id_order.iter().enumerate() {
            id_rank[v] = rank;
        }
        Ok(Self {
            graph: std::sync::Arc::new(Graph {
                vertices: infos,
                index,
                topological_order,
                id_order,
                id_rank,
            }),
        })
    }

    /// All vertices in declaration order.
    pub fn vertices(&self) -> &[VertexInfo] {
        &self.graph.vertices
    }

    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.graph.vertices.len()
    }

    /// Always false: a topology has at least one vertex.
    pub fn is_empty(&self) -> bool {
        self.graph.vertices.is_empty()
    }

    /// The index of `id`, if it is a vertex of this topology.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.graph.index.get(id).copied()
    }

    /// The vertex `id`, if present.
    pub fn get(&self, id: &str) -> Option<&VertexInfo> {
        self.index_of(id).map(|i| &self.graph.vertices[i])
    }

    /// Vertex indices in a topological order (every vertex after all its inputs).
    pub fn topological_order(&self) -> &[usize] {
        &self.graph.topological_order
    }

    /// Vertex indices in id order: the order of every per-vertex map keyed by id, so a map built
    /// along it is built without sorting.
    pub fn id_order(&self) -> &[usize] {
        &self.graph.id_order
    }

    /// The position of each vertex (by index) in [`JobTopology::id_order`].
    pub(crate) fn id_rank(&self) -> &[usize] {
        &self.graph.id_rank
    }

    /// Indices of the vertices without inputs.
    pub fn sources(&self) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .vertices
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_source())
            .map(|(i, _)| i)
    }

    /// Indices of the vertices without outputs.
    pub fn sinks(&self) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .vertices
            .iter()
            .enumerate()
            .filter(|(_, v)| v.outputs.is_empty())
            .map(|(i, _)| i)
    }
}

/// Kahn's algorithm level by level (sources first), keeping declaration order within a level.
fn kahn_order(infos: &[VertexInfo]) -> Result<Vec<usize>, MetricsError> {
    // Level by level (sources first), each level in index order. A vertex's in-degree reaches 0
    // exactly while the level holding its last input is processed, so the next level is built from
    // the current level's outputs: linear in the graph, not levels x vertices (a 100 000-vertex
    // chain has 100 000 levels).
    let mut remaining: Vec<usize> = infos.iter().map(|v| v.inputs.len()).collect();
    let mut order = Vec::with_capacity(infos.len());
    let mut level: Vec<usize> = (0..infos.len()).filter(|&i| remaining[i] == 0).collect();
    while !level.is_empty() {
        let mut next = Vec::new();
        for &i in &level {
            for (o, _) in &infos[i].outputs {
                remaining[*o] -= 1;
                if remaining[*o] == 0 {
                    next.push(*o);
                }
            }
        }
        next.sort_unstable();
        order.append(&mut level);
        level = next;
    }
    if order.len() < infos.len() {
        let mut done = vec![false; infos.len()];
        for &i in &order {
            done[i] = true;
        }
        let on_cycle = (0..infos.len()).find(|&i| !done[i]).map(|i| infos[i].id.clone());
        return Err(MetricsError::Cycle {
            vertex: on_cycle.unwrap_or_else(|| VertexId::new("?")),
        });
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(id: &str, p: u32) -> VertexSpec {
        VertexSpec::new(id, p, 128)
    }

    #[test]
    fn diamond_has_sources_sinks_and_order() {
        let topo = JobTopology::new(
            vec![v("sink", 1), v("a", 1), v("src", 1), v("b", 1)],
            vec![
                EdgeSpec::new("src", "a", ShipStrategy::Hash),
                EdgeSpec::new("src", "b", ShipStrategy::Forward),
                EdgeSpec::new("a", "sink", ShipStrategy::Rebalance),
                EdgeSpec::new("b", "sink", ShipStrategy::Rebalance),
            ],
        )
        .expect("valid diamond");
        let names: Vec<&str> = topo
            .topological_order()
            .iter()
            .map(|i| topo.vertices()[*i].id.as_str())
            .collect();
        assert_eq!(names, ["src", "a", "b", "sink"]);
        assert_eq!(topo.sources().collect::<Vec<_>>(), [2]);
        assert_eq!(topo.sinks().collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn rejects_bad_graphs_with_typed_errors() {
        let cycle = JobTopology::new(
            vec![v("a", 1), v("b", 1)],
            vec![
                EdgeSpec::new("a", "b", ShipStrategy::Hash),
                EdgeSpec::new("b", "a", ShipStrategy::Hash),
            ],
        );
        assert!(matches!(cycle, Err(MetricsError::Cycle { .. })));
        let dangling = JobTopology::new(vec![v("a", 1)], vec![EdgeSpec::new("a", "x", ShipStrategy::Hash)]);
        assert!(matches!(dangling, Err(MetricsError::UnknownVertex { .. })));
        let dup = JobTopology::new(vec![v("a", 1), v("a", 2)], vec![]);
        assert!(matches!(dup, Err(MetricsError::DuplicateVertex { .. })));
        let zero = JobTopology::new(vec![v("a", 0)], vec![]);
        assert!(matches!(zero, Err(MetricsError::ZeroParallelism { .. })));
        let above = JobTopology::new(vec![VertexSpec::new("a", 200, 128)], vec![]);
        assert!(matches!(above, Err(MetricsError::ParallelismAboveMax { .. })));
        assert!(JobTopology::new_lenient(vec![VertexSpec::new("a", 200, 128)], vec![]).is_ok());
    }

    #[test]
    fn ship_strategy_parses_case_insensitively() {
        assert_eq!(ShipStrategy::parse_lenient("hash"), ShipStrategy::Hash);
        assert_eq!(ShipStrategy::parse_lenient("FORWARD"), ShipStrategy::Forward);
        assert_eq!(ShipStrategy::parse_lenient("RANGE"), ShipStrategy::Unknown);
        assert_eq!(ShipStrategy::parse_lenient(" Rebalance\t"), ShipStrategy::Rebalance);
        assert_eq!(ShipStrategy::parse_lenient("SHUFFLED"), ShipStrategy::Unknown);
        assert_eq!(ShipStrategy::parse_lenient(""), ShipStrategy::Unknown);
    }

    #[test]
    fn ids_order_as_their_strings_around_the_key() {
        let ids = [
            "",
            "\0",
            "a",
            "a\0",
            "a\0b",
            "ab",
            "process-269",
            "process-270",
            "0123456789abcdef",
            "0123456789abcdef\0",
            "0123456789abcdefa",
            "0123456789abcdefb",
            "0123456789abcdee~",
        ];
        for a in ids {
            for b in ids {
                let (x, y) = (VertexId::new(a), VertexId::new(b));
                assert_eq!(x.cmp(&y), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(x == y, a == b, "{a:?} vs {b:?}");
            }
        }
    }

    proptest::proptest! {
        /// Ids compare, equal and hash as their strings do, whatever the bytes and the lengths
        /// (short alphabets make shared 16-byte heads and prefixes common).
        #[test]
        fn ids_compare_and_hash_as_strings(a in "[ab\\x00é]{0,20}", b in "[ab\\x00é]{0,20}") {
            use std::hash::BuildHasher;
            let (x, y) = (VertexId::new(&a), VertexId::new(&b));
            proptest::prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            proptest::prop_assert_eq!(x == y, a == b);
            let hasher = foldhash::fast::FixedState::with_seed(7);
            proptest::prop_assert_eq!(hasher.hash_one(&x), hasher.hash_one(a.as_str()));
            let serialized = serde_json::to_string(&x).expect("serializes");
            proptest::prop_assert_eq!(&serialized, &serde_json::to_string(&a).expect("serializes"));
            let back: VertexId = serde_json::from_str(&serialized).expect("deserializes");
            proptest::prop_assert_eq!(back, x);
        }
    }
}
