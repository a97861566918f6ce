"""DynamoDB: a transaction backs up the items it touches, each operation is atomic, an update expression's text is
parsed and checked once (and its tree copied from a pickle), a condition's text is tokenized once, an expression
tree's traversers build their processing map once, a query reads its partition, an item operation's answer is
written as JSON directly, a new item's size is checked once, a value's size is summed from its members (a scalar's
remembered), an update copies its item only for a stream and a transaction parses each operation's condition once."""

from __future__ import annotations

import base64
import copy
import functools
import json
import pickle
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from local.moto_patches.core import _original, _replace, _restore

# --- DynamoDB transactions: back up the items a transaction touches, not its tables ---------------------------

_TRANSACTION = threading.local()  # .active: a `_transact_write_items` runs on this thread


def _dynamodb_models() -> types.ModuleType:
    import moto.dynamodb.models

    return moto.dynamodb.models


class _CopyWithoutTableBackups(types.ModuleType):
    """Stands in for `copy` in `moto.dynamodb.models`: during `_transact_write_items`, a table "copy" is the table;
    in `update_item` on a table without a stream, the item's "copy" is the item.

    Upstream's backup (`copy.deepcopy(self.tables[name])`) becomes the table itself and its rollback
    (`self.tables[name] = backup`) a no-op: `_transact_write_items` restores the touched items instead. `update_item`
    copies the item before it updates it for one use only, the old image of the table's stream record: without a
    stream (Longhaul's table has none) that copy of a job's item (about fifty attributes, at every update) was never
    read. Any other copy, or a table copied on another thread or outside a transaction, is `copy`'s own.
    """

    @staticmethod
    def deepcopy(value: Any, *args: Any, **kwargs: Any) -> Any:
        from moto.dynamodb.models.dynamo_type import Item
        from moto.dynamodb.models.table import Table

        if getattr(_TRANSACTION, "active", False) and isinstance(value, Table):
            return value
        if (
            _ITEM_COPY["for_streams_only"]
            and isinstance(value, Item)
            and _updating_a_streamless_table(sys._getframe(1))
        ):
            return value
        return copy.deepcopy(value, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


#: `copy_items_for_streams_only` sets it; read by `_CopyWithoutTableBackups` (installed by `backup_only_touched_items`).
_ITEM_COPY = {"for_streams_only": False}


def copy_items_for_streams_only() -> None:
    """Skip `update_item`'s copy of the item when the table has no stream (see `_CopyWithoutTableBackups`)."""
    _ITEM_COPY["for_streams_only"] = True


def copy_items_for_every_update() -> None:
    _ITEM_COPY["for_streams_only"] = False


def _updating_a_streamless_table(caller: types.FrameType) -> bool:
    """Whether `caller` is `DynamoDBBackend.update_item` on a table with no stream (its copy would go unread)."""
    if caller.f_code is not _original_update_item_code():
        return False
    table = caller.f_locals.get("table")
    return table is not None and getattr(table, "stream_shard", False) is None


@functools.cache
def _original_update_item_code() -> types.CodeType:
    from moto.dynamodb.models import DynamoDBBackend

    return _original(DynamoDBBackend, "update_item").__code__  # type: ignore[no-any-return]


#: (table, hash key, range key or None, deep copy of the item or None: absent, the item's partition existed)
_ItemBackup = tuple[Any, Any, Any, Any, bool]


def _back_up_items(backend: Any, transact_items: list[dict[str, Any]]) -> tuple[list[_ItemBackup], list[Any]]:
    """The backups of the items the operations address, and each touched stream's (shard, records, length).

    An operation whose table or key moto cannot resolve is skipped: upstream fails it before it writes anything.
    """
    backups: dict[tuple[int, Any, Any], _ItemBackup] = {}
    streams: dict[int, tuple[Any, list[Any], int]] = {}
    for entry in transact_items:
        try:
            op_type, op = next(iter(entry.items()))
            table = backend.get_table(op["TableName"])
            hash_key, range_key = backend.get_keys_value(table, op["Item"] if op_type == "Put" else op["Key"])
        except Exception:  # upstream reports it, and writes nothing for this operation
            continue
        if (id(table), hash_key, range_key) in backups:
            continue  # the same item twice: upstream raises MultipleTransactionsException
        if table.range_key_attr is None:
            partition_existed, item = True, table.items.get(hash_key)
        else:  # items[hash][range]; a plain lookup, not moto's (which creates the partition)
            partition = table.items.get(hash_key)
            partition_existed, item = partition is not None, (partition or {}).get(range_key)
        copied = None if item is None else copy.deepcopy(item)
        backups[(id(table), hash_key, range_key)] = (table, hash_key, range_key, copied, partition_existed)
        shard = table.stream_shard
        if shard is not None:
            streams.setdefault(id(shard), (shard, shard.items, len(shard.items)))
    return list(backups.values()), list(streams.values())


def _restore_items(backups: list[_ItemBackup], streams: list[Any]) -> None:
    for table, hash_key, range_key, item, partition_existed in backups:
        if table.range_key_attr is None:
            if item is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = item
            continue
        partition = table.items[hash_key]
        if item is None:
            partition.pop(range_key, None)
        else:
            partition[range_key] = item
        if not partition_existed and not partition:
            del table.items[hash_key]
    for shard, records, length in streams:
        del records[length:]  # the records the transaction added (`StreamShard.add` may have swapped the list)
        shard.items = records


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """`DynamoDBBackend.transact_write_items`, its rollback backup limited to the items the transaction addresses."""
    from moto.dynamodb.models import DynamoDBBackend

    with DYNAMODB_LOCK:  # a transaction is atomic (see `serialize_dynamodb_operations`)
        backups, streams = _back_up_items(self, transact_items)
        was_active = getattr(_TRANSACTION, "active", False)
        conditions = getattr(_TRANSACTION, "conditions", None)
        _TRANSACTION.active = True
        _TRANSACTION.conditions = {} if conditions is None else conditions
        try:
            _original(DynamoDBBackend, "transact_write_items")(self, transact_items)
        except BaseException:
            _restore_items(backups, streams)
            raise
        finally:
            _TRANSACTION.active = was_active
            _TRANSACTION.conditions = conditions


# One lock for every DynamoDB operation of the in-memory AWS: see `serialize_dynamodb_operations`.
DYNAMODB_LOCK = threading.RLock()
ATOMIC_DYNAMODB_OPERATIONS = ("put_item", "get_item", "update_item", "delete_item", "query", "scan")
#: The request handlers that read or write items: each holds the lock until its answer is built.
ATOMIC_DYNAMODB_HANDLERS = (
    "get_item",
    "batch_get_item",
    "query",
    "scan",
    "transact_get_items",
    "put_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "transact_write_items",
)


def _atomic(owner: type, name: str) -> Callable[..., Any]:
    def operation(self: Any, *args: Any, **kwargs: Any) -> Any:
        with DYNAMODB_LOCK:
            return _original(owner, name)(self, *args, **kwargs)

    operation.__name__ = name
    return operation


def serialize_dynamodb_operations() -> None:
    """Make each DynamoDB operation atomic, as it is on AWS.

    moto's server answers requests on many threads, and its `update_item` reads the item, applies the expression and
    writes it back with no lock: two concurrent `ADD`s to one item lose one of them, a condition can pass on a state
    another thread is changing, and a query can fail with "dictionary changed size during iteration". Once a function
    serves concurrent invocations (a fan-out's items counting their progress on the job, metering their usage), that
    is lost work. One re-entrant lock around each item operation, query, scan and transaction (`_transact_write_items`
    takes it too) gives the serializable single-item writes DynamoDB guarantees.

    An item request's handler holds the lock until its answer is built, the backend's operation included (not while
    the request is authorized, nor while the answer is serialized): the items a read returns are the table's own
    objects, and upstream turns them into its answer after the operation, so another thread's write to one of them
    meanwhile failed the read with "dictionary changed size during iteration" (a 500: a BatchGetItem beside an
    UpdateItem of the same job item); `UpdateItem`'s handler reads the item (a deep copy, for `ReturnValues`) before
    it asks the backend to update it, so the old values it returns are the ones the update replaced (upstream: the
    same 500, seen in a 1,000-document job).
    """
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    for name in ATOMIC_DYNAMODB_OPERATIONS:
        _replace(DynamoDBBackend, name, _atomic(DynamoDBBackend, name))
    for name in ATOMIC_DYNAMODB_HANDLERS:
        _replace(DynamoHandler, name, _atomic(DynamoHandler, name))


def unserialize_dynamodb_operations() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    for name in ATOMIC_DYNAMODB_HANDLERS:
        _restore(DynamoHandler, name)
    for name in ATOMIC_DYNAMODB_OPERATIONS:
        _restore(DynamoDBBackend, name)


def backup_only_touched_items() -> None:
    """Make a DynamoDB transaction's rollback backup proportional to the transaction, not to its tables.

    Upstream deep-copies the whole table once per operation before a `TransactWriteItems` (and puts the copy back
    on failure): with Longhaul's single table, every transaction costs O(table size). Now only the items the
    operations address (TableName + Key, for a Put the key of its Item) are deep-copied (or noted absent), and on
    any failure exactly those are put back (the absent ones deleted), with the stream records the transaction
    added; moto's own code still runs the transaction and raises its errors (TransactionCanceledException with
    its CancellationReasons...). Secondary indexes are computed from the items at query time, and query/scan
    results are sorted by key, so nothing else needs restoring. Differences, all closer to AWS: a rollback keeps
    the table object (references stay valid), also happens on errors upstream leaves half-applied (an operation
    with two actions), and covers a table named by its ARN (upstream backs up tables by name only).
    """
    from moto.dynamodb.models import DynamoDBBackend

    _replace(_dynamodb_models(), "copy", _CopyWithoutTableBackups("copy"))
    _replace(DynamoDBBackend, "transact_write_items", _transact_write_items)


def back_up_whole_tables() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    _restore(DynamoDBBackend, "transact_write_items")
    _restore(_dynamodb_models(), "copy")


# --- DynamoDB: an update expression's text parsed once -------------------------------------------------------

#: Update expression texts kept parsed (the handlers use a few dozen).
UPDATE_EXPRESSION_CACHE_SIZE = 1024


def _update_expression_parser_class() -> type:
    from moto.dynamodb.parsing import expressions

    parser: type = getattr(expressions, "UpdateExpressionParser")  # noqa: B009 (not visible to mypy in moto)
    return parser


def _validators() -> types.ModuleType:
    from moto.dynamodb.parsing import validators

    return validators


#: The attributes a parsed text's tree carries: its text, and the tree pickled (what each update copies).
_TEXT, _PICKLED = "_longhaul_update_text", "_longhaul_update_pickled"


@functools.lru_cache(maxsize=UPDATE_EXPRESSION_CACHE_SIZE)
def _parsed_update_expression(expression: str) -> Any:
    tree = _original(_update_expression_parser_class(), "make")(expression)
    _validators().ActionCountValidator().traverse(copy.deepcopy(tree))  # raises TooManyClauses: then not cached
    pickled = pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)  # before the attributes: copies have neither
    setattr(tree, _TEXT, expression)
    setattr(tree, _PICKLED, pickled)
    return tree


def _make_update_expression(cls: type, expression_str: str) -> Any:
    return _parsed_update_expression(expression_str)


def _copy_of_tree(value: Any, *args: Any, **kwargs: Any) -> Any:
    """`deepcopy` in moto's validators: a parsed text's tree is copied from its pickle (the same objects, built in C
    rather than walked in Python: a fifth of the time), marked with its text; any other value as `deepcopy` does."""
    pickled = getattr(value, _PICKLED, None)
    if pickled is None or args or kwargs:
        return copy.deepcopy(value, *args, **kwargs)
    copied = pickle.loads(pickled)  # our own bytes, pickled in this process from a parsed tree
    setattr(copied, _TEXT, getattr(value, _TEXT))
    return copied


@functools.lru_cache(maxsize=UPDATE_EXPRESSION_CACHE_SIZE)
def _paths_checked(expression: str, names: tuple[tuple[str, str], ...]) -> bool:
    """The overlapping-paths check of (text, names), run once: it raises every time for a text that fails it."""
    _validators().OverlappingPathsValidator(dict(names)).traverse(_copy_of_tree(_parsed_update_expression(expression)))
    return True


@functools.lru_cache(maxsize=UPDATE_EXPRESSION_CACHE_SIZE)
def _keys_checked(expression: str, names: tuple[tuple[str, str], ...], keys: tuple[str, ...]) -> bool:
    """The check that (text, names) updates no key attribute of a table with `keys`, run once (raises every time)."""
    tree = _copy_of_tree(_parsed_update_expression(expression))
    _validators().UpdateHashRangeKeyValidator(list(keys), dict(names)).traverse(tree)
    return True


#: The action nodes of an update's tree: an action's first child is the path it writes, the others its value.
_ACTIONS = frozenset(f"UpdateExpression{kind}Action" for kind in ("Set", "Remove", "Delete", "Add"))


@functools.lru_cache(maxsize=UPDATE_EXPRESSION_CACHE_SIZE)
def _tree_shape(expression: str) -> tuple[frozenset[str], bool]:
    """The names of the node types in the text's tree, and whether a path of it is read from the item: one in an
    action's value (not its first child), where `ExpressionAttributeResolvingProcessor` resolves it (into the item's
    value, or `NoneExistingPath` when the item has none). Neither depends on the names, the values or the item."""
    types_found: set[str] = set()
    reads_paths = False
    pending: list[tuple[Any, bool]] = [(_parsed_update_expression(expression), False)]
    while pending:
        node, in_value = pending.pop()
        name = type(node).__name__
        types_found.add(name)
        reads_paths = reads_paths or (in_value and name == "UpdateExpressionPath")
        action = name in _ACTIONS  # its children by their index, as the resolving processor counts them
        children = enumerate(getattr(node, "children", None) or ())
        pending.extend((child, in_value or (action and i > 0)) for i, child in children if hasattr(child, "children"))
    return frozenset(types_found), reads_paths


def _has(node_type: str) -> Callable[[str], bool]:
    return lambda text: node_type in _tree_shape(text)[0]


def _reads_paths(text: str) -> bool:
    return _tree_shape(text)[1]


#: The processors of moto's update validation that change or check only nodes a text may not have, and when a text
#: has them: the function evaluator rewrites function calls; `ExecuteOperations` computes `a + b` and `a - b` (an
#: `UpdateExpressionValue`, a SET's value); the type and empty-key checks look at SET actions; `NoneExistingPathChecker`
#: refuses a `NoneExistingPath`, which only the resolving of a path in an action's value makes. No value, name or item
#: adds a node of those types to a tree without them.
_WALKED_IF: dict[str, Callable[[str], bool]] = {
    "UpdateExpressionFunctionEvaluator": _has("UpdateExpressionFunction"),
    "ExecuteOperations": _has("UpdateExpressionValue"),
    "TypeMismatchValidator": _has("UpdateExpressionSetAction"),
    "EmptyStringKeyValueValidator": _has("UpdateExpressionSetAction"),
    "NoneExistingPathChecker": _reads_paths,
}


class _WalkedIfNeeded:
    """Stands in for a processor of `_WALKED_IF`: it walks the tree only if the tree's text has a node it would
    change or check (a walk of a tree without one leaves it as it was and raises nothing)."""

    def __init__(self, upstream: Any, needed: Callable[[str], bool]) -> None:
        self.upstream = upstream
        self.needed = needed

    def traverse(self, node: Any) -> Any:
        text = getattr(node, _TEXT, None)
        if text is None or self.needed(text):
            return self.upstream.traverse(node)
        return node


class _CheckedOnce:
    """Stands in for a processor of moto's update validation whose check depends on the text and its attribute
    names alone (and the table's key attributes): `OverlappingPathsValidator` (no two actions write overlapping
    paths) and `UpdateHashRangeKeyValidator` (no action writes a key attribute). It runs once per text, names and
    keys; it leaves the tree as it is."""

    def __init__(self, upstream: Any) -> None:
        self.upstream = upstream

    def traverse(self, node: Any) -> Any:
        text = getattr(node, _TEXT, None)
        names = self.upstream.expression_attribute_names
        if text is None or not isinstance(names, dict):
            return self.upstream.traverse(node)
        if isinstance(self.upstream, _validators().UpdateHashRangeKeyValidator):
            _keys_checked(text, tuple(sorted(names.items())), tuple(self.upstream.table_key_attributes))
        else:
            _paths_checked(text, tuple(sorted(names.items())))
        return node


def _processors_checked_once(self: Any) -> list[Any]:
    validators = _validators()
    processors = _original(validators.UpdateExpressionValidator, "get_ast_processors")(self)
    once = (validators.OverlappingPathsValidator, validators.UpdateHashRangeKeyValidator)
    return [
        _CheckedOnce(p)
        if isinstance(p, once)
        else _WalkedIfNeeded(p, _WALKED_IF[type(p).__name__])
        if type(p).__name__ in _WALKED_IF
        else p
        for p in processors
        if not isinstance(p, validators.ActionCountValidator)
    ]


def parse_update_expressions_once() -> None:
    """Tokenize, parse and check an UpdateExpression text once, not two or three times per request.

    Upstream parses the text in the request handler (to list the placeholders it uses) and again in the backend, per
    UpdateItem and per Update of a transaction: 12% of the CPU of a submission's DynamoDB calls. The tree is only
    read (`find_clauses`) or deep-copied first (`Validator.__init__` copies it before it resolves names and values
    into it), so one tree per text serves every request; a text that does not parse raises every time.

    The checks that depend on the text alone run once too. That it has at most one SET, ADD and REMOVE clause
    (`ActionCountValidator`; upstream runs it on every update in quadratic time, each nested clause node listing all
    the clauses below it: 10% of the CPU of a submission's updates) runs when the text is parsed; a text that fails
    it is refused with the same error, before the item is read rather than after. That no two actions write
    overlapping paths (`OverlappingPathsValidator`, as costly, and depending on the attribute names too) runs once
    per text and names, and that none writes a key attribute (`UpdateHashRangeKeyValidator`) once per text, names
    and table keys. The processors that change or check only nodes of types a text may not have walk only the trees
    of texts that have them (`_WALKED_IF`): a counter's `ADD n :one` is walked twice (its values, then its paths
    against the item) rather than six times. And the validator's
    private copy of the tree is made from the tree's pickle rather than by `deepcopy` walking it in Python. A fan-out
    item's commit updates the job item twice: these were a tenth of a 1,000-document job's CPU.
    """
    _replace(_update_expression_parser_class(), "make", classmethod(_make_update_expression))
    _replace(_validators().UpdateExpressionValidator, "get_ast_processors", _processors_checked_once)
    _replace(_validators(), "deepcopy", _copy_of_tree)


def parse_update_expressions_every_time() -> None:
    _restore(_validators(), "deepcopy")
    _restore(_validators().UpdateExpressionValidator, "get_ast_processors")
    _restore(_update_expression_parser_class(), "make")
    _parsed_update_expression.cache_clear()
    _paths_checked.cache_clear()
    _keys_checked.cache_clear()
    _tree_shape.cache_clear()


# --- DynamoDB: a condition expression's text tokenized once ----------------------------------------------------

#: Condition (and filter) expression texts kept tokenized.
CONDITION_TOKENS_CACHE_SIZE = 1024


def _condition_parser_class() -> type:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    return ConditionExpressionParser


@functools.lru_cache(maxsize=CONDITION_TOKENS_CACHE_SIZE)
def _condition_tokens(text: str) -> tuple[Any, ...]:
    parser = _condition_parser_class()(text, None, None)
    return tuple(_original(_condition_parser_class(), "_lex_condition_expression")(parser))


def _lex_condition_expression(self: Any) -> Any:
    from collections import deque

    return deque(_condition_tokens(self.condition_expression))


def tokenize_conditions_once() -> None:
    """Tokenize a ConditionExpression (or FilterExpression) text once, not on every request.

    moto's parser splits the text into tokens with a list of regular expressions per token, then resolves names and
    values into them; the tokens depend on the text alone and are immutable tuples (the later passes build new nodes
    into a new queue), so each request now starts from a fresh queue of the text's tokens. A text that does not
    tokenize raises every time. Nearly every write of the platform is conditional: a tenth of a transaction's time
    in moto.
    """
    _replace(_condition_parser_class(), "_lex_condition_expression", _lex_condition_expression)


def tokenize_conditions_every_time() -> None:
    _restore(_condition_parser_class(), "_lex_condition_expression")
    _condition_tokens.cache_clear()


def _parse_once_per_transaction(self: Any) -> Any:
    """`ConditionExpressionParser.parse`: in a transaction, an operation's condition parsed once for its two checks."""
    memo: dict[tuple[Any, int, int], tuple[Any, Any, Any]] | None = getattr(_TRANSACTION, "conditions", None)
    if memo is None:
        return _original(_condition_parser_class(), "parse")(self)
    names, values = self.expression_attribute_names, self.expression_attribute_values
    key = (self.condition_expression, id(names), id(values))
    found = memo.get(key)
    if found is not None and found[0] is names and found[1] is values:
        return found[2]
    parsed = _original(_condition_parser_class(), "parse")(self)
    memo[key] = (names, values, parsed)  # holding the dicts: their ids stay theirs while the transaction runs
    return parsed


def parse_conditions_once_per_transaction() -> None:
    """Parse a transaction operation's ConditionExpression once, not twice.

    Upstream's `transact_write_items` evaluates each operation's condition itself, then hands the operation with its
    condition to `put_item`, `update_item` or `delete_item`, which parse it from its text and evaluate it again: the
    same text, names and values (the very same dictionaries), against the same item (the transaction holds the
    DynamoDB lock, and no two operations of a transaction may address one item). While a transaction runs, a parse
    of a (text, names, values) it has parsed already returns that parse: the tree is only read by its evaluation. A
    condition that does not parse raises the first time, and the operation fails with it as upstream. A quarter of
    a submission's transaction was spent parsing its conditions, half of it twice.
    """
    _replace(_condition_parser_class(), "parse", _parse_once_per_transaction)


def parse_conditions_for_every_check() -> None:
    _restore(_condition_parser_class(), "parse")


# --- DynamoDB: an expression tree's traversers read their processing map once ---------------------------------


def _traverser_class() -> type:
    from moto.dynamodb.parsing import ast_nodes

    traverser: type = getattr(ast_nodes, "DepthFirstTraverser")  # noqa: B009 (not visible to mypy in moto)
    return traverser


def _processing(self: Any) -> dict[type, Callable[[Any], Any]]:
    """The traverser's processing map (node class → its processor), built once per traverser."""
    found: dict[type, Callable[[Any], Any]] | None = self.__dict__.get("_longhaul_processing")
    if found is None:
        found = self.__dict__["_longhaul_processing"] = self._processing_map()
    return found


def _nodes_to_be_processed(self: Any) -> tuple[type, ...]:
    found: tuple[type, ...] | None = self.__dict__.get("_longhaul_processed_types")
    if found is None:
        found = self.__dict__["_longhaul_processed_types"] = tuple(_processing(self))
    return found


def _process(self: Any, node: Any) -> Any:
    for class_key, processor in _processing(self).items():
        if isinstance(node, class_key):
            return processor(node)
    return None


def read_processing_maps_once() -> None:
    """A traverser of an expression tree builds its processing map once, not twice per node it visits.

    moto's `DepthFirstTraverser` asks `_processing_map()` (a new dict of bound methods, the same every time: every
    subclass's map is a constant of the instance) for each node it visits, to test the node's class and again to
    process it; an update runs some eight traversers over its tree. The map is now built on first use and kept on
    the traverser (which lives for one update): a fifth of an UpdateItem's time in moto.
    """
    _replace(_traverser_class(), "nodes_to_be_processed", _nodes_to_be_processed)
    _replace(_traverser_class(), "process", _process)


def read_processing_maps_per_node() -> None:
    _restore(_traverser_class(), "process")
    _restore(_traverser_class(), "nodes_to_be_processed")


# --- DynamoDB: a query reads its partition, not the whole table ------------------------------------------------


def _table_class() -> type:
    from moto.dynamodb.models.table import Table

    return Table


class _QueryView:
    """A table as one query sees it: `all_items` is only what the query can match, unsorted (upstream's query sorts
    what it keeps itself); everything else is the table's."""

    def __init__(self, table: Any, hash_key: Any, range_comparison: str | None, range_objs: list[Any]) -> None:
        self._table, self._hash_key = table, hash_key
        self._range_comparison, self._range_objs = range_comparison, range_objs

    def all_items(self) -> list[Any]:
        table = self._table
        if self._hash_key is None:  # a query of an index: every item, as upstream (its loop matches the index's keys)
            return [i for part in table.items.values() for i in (part.values() if table.range_key_attr else [part])]
        part = table.items.get(self._hash_key)  # (`get`: a defaultdict, and a query must not create a partition)
        if part is None:
            return []
        if not table.range_key_attr:
            return [part]
        if self._range_comparison is None:
            return list(part.values())
        return [i for i in part.values() if i.range_key.compare(self._range_comparison, self._range_objs)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def _query(
    self: Any,
    hash_key: Any,
    range_comparison: str | None,
    range_objs: list[Any],
    limit: int,
    exclusive_start_key: dict[str, Any],
    scan_index_forward: bool,
    projection_expressions: list[list[str]] | None,
    index_name: str | None = None,
    *args: Any,
    **kwargs: Any,
) -> Any:
    view = _QueryView(self, None if index_name else hash_key, None if index_name else range_comparison, range_objs)
    return _original(_table_class(), "query")(
        view,
        hash_key,
        range_comparison,
        range_objs,
        limit,
        exclusive_start_key,
        scan_index_forward,
        projection_expressions,
        index_name,
        *args,
        **kwargs,
    )


def query_one_partition() -> None:
    """Make a query read the items it can match, not a sorted copy of the whole table.

    Upstream's `Table.query` starts from `all_items()`: every item of the table, sorted, on every query, and then
    keeps the query's partition (or its index's key) and sorts again. Its page-size check also sizes every item of
    the partition, also those its key condition leaves out. A job's partition grows with its documents (events,
    checkpoints) and the table with every job: a step's query cost grew with the whole table, under the lock every
    DynamoDB operation takes (`serialize_dynamodb_operations`). Here the query starts from its own partition's items
    that meet its key condition (a query of an index: every item, unsorted). What it answers and in which order are
    upstream's; a page ends at 1 MB of the items the key condition matched, as on AWS (upstream also counted the
    others).
    """
    _replace(_table_class(), "query", _query)


def query_whole_table() -> None:
    _restore(_table_class(), "query")


# --- DynamoDB: an item operation's answer written as JSON directly -------------------------------------------------

#: The operations whose answer is items (AttributeValues, already in their wire form) and plain counts.
ITEM_OPERATIONS = frozenset(
    {"GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem", "TransactGetItems"}
)


def _dynamo_result_class() -> type:
    from moto.dynamodb.responses import DynamoResult

    return DynamoResult


def _binary(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not an AttributeValue")


def _item_answer(self: Any, context: Any) -> Any:
    """`DynamoResult.execute_result`: an item operation's result as JSON, its binary values in base64."""
    from moto.core.serialize import BaseJSONSerializer

    operation = context.operation_model
    if (
        operation.name not in ITEM_OPERATIONS
        or not isinstance(self.result, dict)
        or not issubclass(context.serializer_class, BaseJSONSerializer)
    ):
        return _original(_dynamo_result_class(), "execute_result")(self, context)
    members = operation.output_shape.members
    try:
        body = json.dumps({k: v for k, v in self.result.items() if k in members and v is not None}, default=_binary)
    except TypeError:  # something this fast path does not know: upstream's serializer decides
        return _original(_dynamo_result_class(), "execute_result")(self, context)
    content_type = f"application/x-amz-json-{context.service_model.metadata.get('jsonVersion', '1.0')}"
    return operation.http.get("responseCode", 200), {"Content-Type": content_type}, body


def write_item_answers_directly() -> None:
    """Write an item operation's answer (GetItem, BatchGetItem, Query, Scan, PutItem, UpdateItem, DeleteItem,
    TransactGetItems) with `json.dumps`.

    Upstream serializes every answer by walking the operation's output shape and, for every value, trying the
    spellings its attribute might have (`AttributePicker`): for items, whose values are already in their wire form,
    that walk was half of a BatchGetItem's time. The answer is the same document: the output shape's members, binary
    values in base64 (a test compares the two on items of every attribute type).
    """
    _replace(_dynamo_result_class(), "execute_result", _item_answer)


def serialize_item_answers_by_shape() -> None:
    _restore(_dynamo_result_class(), "execute_result")


# --- DynamoDB: a value's size summed from its members ------------------------------------------------------------


def _dynamo_type_class() -> type:
    from moto.dynamodb.models.dynamo_type import DynamoType

    return DynamoType


#: The scalar types: a value of one is immutable (a string, bytes or a bool), so its size is a function of it alone.
_SCALARS = frozenset({"S", "N", "B", "BOOL", "NULL"})


def _sized_directly(upstream: Callable[[Any], int]) -> Callable[[Any], int]:
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.utilities import bytesize

    def size(self: Any) -> int:
        """`DynamoType.size`: upstream's sums, without building a `DynamoType` per member, a scalar's remembered."""
        kind, value = self.type, self.value
        if kind in _SCALARS:
            remembered = self.__dict__.get("_longhaul_size")
            if remembered is not None and remembered[0] is value and remembered[1] == kind:
                return int(remembered[2])
            measured = upstream(self)
            self._longhaul_size = (value, kind, measured)
            return measured
        if kind == "NS":
            return sum(len(str(member)) for member in value)
        if kind in ("SS", "BS"):
            return sum(bytesize(member) for member in value)
        if kind == "L":
            return sum((v if type(v) is DynamoType else DynamoType(v)).size() for v in value)
        if kind == "M":
            return sum(bytesize(k) + (v if type(v) is DynamoType else DynamoType(v)).size() for k, v in value.items())
        return upstream(self)

    return size


def size_values_directly() -> None:
    """Size an attribute value without building a `DynamoType` for each of its members, and a scalar once.

    moto checks an item's size (the 400 KB limit) on every attribute an update sets, summing every attribute of the
    item again: a step's commit sets about ten attributes of the job's item, each one sizing all fifty of them, and a
    map's size rebuilt a `DynamoType` (and every list and map below it) per member. A fan-out's committed items are a
    number set on the job item (one ADD per item), so each of a 1,000-document job's item commits sized a set of up
    to 1,000 numbers several times: a sixth of the job's CPU; the checks were a third of a step's commit.

    Sets, lists and maps are summed from their members as they are (the members of a list or map already are
    `DynamoType`s: rebuilding one copies it and sizes the same type and value); a scalar's size is remembered with the
    value it measured (strings, bytes and bools are immutable: a value assigned anew, or a changed type, is measured
    anew). The sizes are the same numbers (a test compares them, values changed in place among them).
    """
    _replace(_dynamo_type_class(), "size", _sized_directly(_original(_dynamo_type_class(), "size")))


def size_values_like_upstream() -> None:
    _restore(_dynamo_type_class(), "size")


# --- DynamoDB: a new item's size checked once ------------------------------------------------------------------


def _item_class() -> type:
    from moto.dynamodb.models.dynamo_type import Item

    return Item


def _item_sized_once(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
    """`Item.__init__`: the attributes set, then the item's size checked once against the limit upstream checks."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict

    self.hash_key = hash_key
    self.range_key = range_key
    self.attrs = LimitedSizeDict()
    for key, value in attrs.items():
        dict.__setitem__(self.attrs, key, DynamoType(value))
    if self.size() > ITEM_SIZE_LIMIT:
        raise ItemSizeTooLarge


#: `LimitedSizeDict`'s limit (upstream: "between 409 and 410KB", set in between).
ITEM_SIZE_LIMIT = 405000


def size_new_items_once() -> None:
    """Check a new item's size once, not once per attribute.

    Upstream builds an item attribute by attribute, and its `LimitedSizeDict` sums the size of every attribute
    already set before each one it adds: an item of n attributes is sized n times over, O(n²). A job's item has
    about fifty attributes, and every PutItem, transaction and conditional write builds one (about a millisecond of
    the interpreter each). The attributes are the same and so is the refusal: sizes only add, so the sum passes the
    limit at some attribute exactly when the whole item does (a test builds items both ways, one over the limit).
    """
    _replace(_item_class(), "__init__", _item_sized_once)


def size_new_items_per_attribute() -> None:
    _restore(_item_class(), "__init__")
