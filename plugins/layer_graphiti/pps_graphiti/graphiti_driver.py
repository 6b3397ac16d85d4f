"""graphiti's Kuzu driver over the database this plugin opened (imported only when graphiti is needed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphiti_core.driver.kuzu.operations.community_edge_ops import KuzuCommunityEdgeOperations
from graphiti_core.driver.kuzu.operations.community_node_ops import KuzuCommunityNodeOperations
from graphiti_core.driver.kuzu.operations.entity_edge_ops import KuzuEntityEdgeOperations
from graphiti_core.driver.kuzu.operations.entity_node_ops import KuzuEntityNodeOperations
from graphiti_core.driver.kuzu.operations.episode_node_ops import KuzuEpisodeNodeOperations
from graphiti_core.driver.kuzu.operations.episodic_edge_ops import KuzuEpisodicEdgeOperations
from graphiti_core.driver.kuzu.operations.graph_ops import KuzuGraphMaintenanceOperations
from graphiti_core.driver.kuzu.operations.has_episode_edge_ops import KuzuHasEpisodeEdgeOperations
from graphiti_core.driver.kuzu.operations.next_episode_edge_ops import KuzuNextEpisodeEdgeOperations
from graphiti_core.driver.kuzu.operations.saga_node_ops import KuzuSagaNodeOperations
from graphiti_core.driver.kuzu.operations.search_ops import KuzuSearchOperations
from graphiti_core.driver.kuzu_driver import KuzuDriver

if TYPE_CHECKING:  # pragma: no cover
    from .graph import KuzuHandle


class SharedKuzuDriver(KuzuDriver):
    """graphiti's ``KuzuDriver`` on :class:`~pps_graphiti.engine_client.KuzuHandle`'s database, connection and gate.

    ``KuzuDriver.__init__`` opens a database of its own (a second one on the same file); this sets up the
    same operations on ours instead. ``db`` and ``client`` are read from the handle at every use, so a
    compaction that reopens the database under the gate (``compact._swap``) is seen here too.
    """

    def __init__(self, handle: KuzuHandle, group_id: str) -> None:
        self._handle = handle
        # graphiti's add_episode compares group ids with driver._database, which KuzuDriver never sets.
        self._database = group_id
        self._entity_node_ops = KuzuEntityNodeOperations()
        self._episode_node_ops = KuzuEpisodeNodeOperations()
        self._community_node_ops = KuzuCommunityNodeOperations()
        self._saga_node_ops = KuzuSagaNodeOperations()
        self._entity_edge_ops = KuzuEntityEdgeOperations()
        self._episodic_edge_ops = KuzuEpisodicEdgeOperations()
        self._community_edge_ops = KuzuCommunityEdgeOperations()
        self._has_episode_edge_ops = KuzuHasEpisodeEdgeOperations()
        self._next_episode_edge_ops = KuzuNextEpisodeEdgeOperations()
        self._search_ops = KuzuSearchOperations()
        self._graph_ops = KuzuGraphMaintenanceOperations()

    @property  # type: ignore[override]
    def db(self):
        return self._handle.db

    @property  # type: ignore[override]
    def client(self):
        return self._handle.client

    @property
    def pps_gate(self):
        return self._handle.pps_gate

    async def execute_query(self, cypher_query_: str, **kwargs: Any):
        """Through the gate (see :class:`~pps_graphiti.engine_client.QueryGate`), never logging parameters."""
        return await self._handle.pps_gate.execute_query(cypher_query_, **kwargs)

    def setup_schema(self) -> None:  # the handle created it
        pass

    async def close(self) -> None:  # the graph closes the handle
        pass
