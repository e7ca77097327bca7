"""delta-spark's ``CommitCoordinatorClient`` implemented in Python over py4j.

:func:`use_commit_owner` registers, in the driver JVM, a commit-coordinator builder named ``name``
whose clients forward Delta's four calls to a :class:`~client.CommitOwnerClient`:

* ``registerTable`` -> ``register_table`` (with the staged-commit folder this Delta version reads);
* ``commit`` -> ``commit``: the actions iterator is drained on the JVM side in one call, the commit is
  sent with an idempotency key derived from (table, version, bytes) so that Delta retrying the same
  attempt can never create a second version; failures reach Delta as a real
  ``io.delta.storage.commit.CommitFailedException`` with the owner's (retryable, conflict) flags;
* ``getCommits`` -> ``get_commits`` (called from Delta's thread pool; everything here is thread-safe);
* ``backfillToVersion`` -> ``backfill_to_version``.

To let a real Java exception cross the callback boundary, registration turns on py4j's
``propagate_java_exceptions`` for the driver's gateway. That only changes how a Java exception raised by
a Python callback surfaces in Java: as itself instead of a generic ``Py4JException``. py4j's error log of
the failures the bridge reports on purpose (a lost race, a refused commit) is filtered out.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from py4j.java_gateway import JavaClass, JavaObject
from py4j.protocol import Py4JJavaError

from client.contract.errors import (
    CommitDirMismatchError,
    CommitFailedError,
    CommitOwnerError,
    CommitStateUnknownError,
    DeltaSparkUnavailableError,
)
from client.contract.layout import COMMITS_DIR
from client.http import CommitOwnerClient
from client.spark.jars import AWS_SDK_V1_DYNAMODB, AWS_SDK_V1_PROBE_CLASS, HOW_TO_CHECK, how_to_get_delta_spark

PROVIDER_CLASS = "org.apache.spark.sql.delta.coordinatedcommits.CommitCoordinatorProvider"
BUILDER_INTERFACE = "org.apache.spark.sql.delta.coordinatedcommits.CommitCoordinatorBuilder"
CLIENT_INTERFACE = "io.delta.storage.commit.CommitCoordinatorClient"
UTILS_CLASS = "io.delta.storage.commit.CoordinatedCommitsUtils"
OLD_PROVIDER_CLASS = "org.apache.spark.sql.delta.managedcommit.CommitOwnerProvider"
# Delta's own DynamoDB coordinator: its provider builds one at start-up, which needs the AWS SDK v1.
DYNAMODB_BUILDER_CLASS = "io.delta.dynamodbcommitcoordinator.DynamoDBCommitCoordinatorClientBuilder"

_TO_STRING_PREFIX = "delta-commit-owner coordinator client for "
# Idempotency keys of bridge commits live in their own namespace (uuid5 of table, version and bytes).
_KEY_NAMESPACE = uuid.UUID("6f1c2b56-4a52-4d0e-9a53-8c3b1e0f2d71")


def _java_class(jvm: Any, name: str) -> Any | None:
    node = jvm
    for part in name.split("."):
        node = getattr(node, part)
    return node if isinstance(node, JavaClass) else None


def staged_commit_dir(jvm: Any) -> str:
    """The staged-commit folder name the Delta classes in this JVM read (``_staged_commits`` or ``_commits``)."""
    utils = _java_class(jvm, UTILS_CLASS)
    log_path = jvm.org.apache.hadoop.fs.Path("/probe/_delta_log")
    if utils is not None:
        try:
            return str(utils.commitDirPath(log_path).getName())
        except Py4JJavaError:
            raise
        except Exception:  # noqa: BLE001 - an older utils class without commitDirPath
            pass
    return COMMITS_DIR


def _driver_jvm(spark_or_jvm: Any) -> Any:
    from pyspark.sql import SparkSession

    # (a py4j JVM view answers every attribute name, so ask the type, not the object)
    return spark_or_jvm.sparkContext._jvm if isinstance(spark_or_jvm, SparkSession) else spark_or_jvm


def _has_class_file(jvm: Any, name: str) -> bool:
    """Whether the class loader py4j uses can see ``name``'s class file, without loading the class.

    (Looking a class up through py4j loads it; for Delta's DynamoDB builder without the AWS SDK that throws
    NoClassDefFoundError inside py4j's own thread and breaks the gateway connection.)
    """
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    if loader is None:
        loader = jvm.java.lang.ClassLoader.getSystemClassLoader()
    return loader.getResource(name.replace(".", "/") + ".class") is not None


def _missing_aws_sdk(cause: str) -> DeltaSparkUnavailableError:
    return DeltaSparkUnavailableError(
        "delta-spark's CommitCoordinatorProvider cannot be initialized: the AWS SDK v1 DynamoDB classes are not on "
        f"the driver class path ({cause}). Delta loads them even when no table uses DynamoDB, and declares them a "
        f"'provided' dependency, so fetching delta-spark does not bring them. Add {AWS_SDK_V1_DYNAMODB} to "
        "spark.jars.packages, or its jar and aws-java-sdk-core's to spark.jars and spark.driver.extraClassPath, "
        f"before the session starts; {HOW_TO_CHECK}"
    )


def check_delta_spark(spark_or_jvm: Any) -> None:
    """Raise DeltaSparkUnavailableError unless the driver JVM has delta-spark >= 3.3's commit-coordinator API
    and the AWS SDK v1 classes its provider loads. Takes a SparkSession or its ``sparkContext._jvm``."""
    jvm = _driver_jvm(spark_or_jvm)
    if _java_class(jvm, PROVIDER_CLASS) is None or _java_class(jvm, CLIENT_INTERFACE) is None:
        if _java_class(jvm, OLD_PROVIDER_CLASS) is not None:
            raise DeltaSparkUnavailableError(
                "delta-spark in this SparkSession is too old (3.2 or earlier, 'managed commits' preview); "
                f"use delta-spark >= 3.3 (4.x needs pyspark >= 4.0): {how_to_get_delta_spark()}; {HOW_TO_CHECK}"
            )
        raise DeltaSparkUnavailableError(
            f"delta-spark is not on the driver class path ({PROVIDER_CLASS} not found): {how_to_get_delta_spark()}; "
            f"{HOW_TO_CHECK}"
        )
    if _has_class_file(jvm, DYNAMODB_BUILDER_CLASS) and not _has_class_file(jvm, AWS_SDK_V1_PROBE_CLASS):
        raise _missing_aws_sdk(f"{AWS_SDK_V1_PROBE_CLASS} not found")


def _java_causes(error: Py4JJavaError) -> list[tuple[str, str]]:
    """(class name, message) of the Java exception behind ``error`` and each of its causes."""
    out: list[tuple[str, str]] = []
    exc = getattr(error, "java_exception", None)
    while exc is not None and len(out) < 10:
        try:
            out.append((str(exc.getClass().getName()), str(exc.getMessage() or "")))
            cause = exc.getCause()
        except Exception:  # noqa: BLE001 - a Java object py4j can no longer reach: stop here
            break
        exc = None if cause is None or cause.equals(exc) else cause
    return out


def explain_missing_classes(error: Py4JJavaError) -> DeltaSparkUnavailableError | None:
    """The clear error for a Java failure caused by a class missing from the driver, or None if it is not one.

    A missing AWS SDK v1 class (``NoClassDefFoundError: com/amazonaws/...``) becomes the error naming
    the AWS jar; a provider whose initialization failed earlier in this JVM (``Could not initialize class``)
    the same, since that is what makes it fail.
    """
    for name, message in _java_causes(error):
        if name not in ("java.lang.NoClassDefFoundError", "java.lang.ClassNotFoundException",
                        "java.lang.ExceptionInInitializerError"):
            continue
        if "com/amazonaws/" in message or "com.amazonaws." in message:
            return _missing_aws_sdk(f"{name}: {message}")
        if "Could not initialize class" in message and "delta" in message:
            return _missing_aws_sdk(f"{name}: {message}; its first failure in this JVM is the one to look at")
    return None


def table_location(log_path: Any) -> str:
    """The table location the owner knows, from Delta's ``_delta_log`` Hadoop Path."""
    # The URI form (percent-encoded) so the owner's decoding yields the real path.
    return str(log_path.getParent().toUri().toString())


def _idempotency_key(table_id: str, version: int, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return str(uuid.uuid5(_KEY_NAMESPACE, f"{table_id}:{version}:{digest}"))


class _BridgeJavaError(Py4JJavaError):
    """A Java exception this bridge raises on purpose (py4j hands ``java_exception`` to the Java caller)."""


class _QuietExpectedFailures(logging.Filter):
    """Drop py4j's ERROR traceback for failures the bridge reports to Delta on purpose (e.g. a lost race)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _BridgeJavaError)


_QUIET = _QuietExpectedFailures()


def _install_log_filter() -> None:
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logger = logging.getLogger(name)
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)


class _JavaErrors:
    """Builds Java exceptions and raises them through py4j so Java sees the real classes."""

    def __init__(self, jvm: Any) -> None:
        self._jvm = jvm

    def commit_failed(self, retryable: bool, conflict: bool, message: str) -> Py4JJavaError:
        jexc = self._jvm.io.delta.storage.commit.CommitFailedException(bool(retryable), bool(conflict), message)
        return _BridgeJavaError(message, jexc)

    def io_error(self, message: str) -> Py4JJavaError:
        return _BridgeJavaError(message, self._jvm.java.io.IOException(message))

    def illegal_state(self, message: str) -> Py4JJavaError:
        return _BridgeJavaError(message, self._jvm.java.lang.IllegalStateException(message))


class CommitOwnerCoordinatorClient:
    """One Python implementation of Delta's ``CommitCoordinatorClient`` for one owner endpoint."""

    class Java:
        implements = [CLIENT_INTERFACE]

    def __init__(self, gateway: Any, client: CommitOwnerClient, commit_dir: str) -> None:
        self._gateway = gateway
        self._jvm = gateway.jvm
        self.client = client
        self.endpoint = client.endpoint
        self.commit_dir = commit_dir
        self._errors = _JavaErrors(self._jvm)
        self._checked: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- helpers ------------------------------------------------------------------------------------

    def _table_id(self, descriptor: Any) -> str:
        conf = descriptor.getTableConf()
        table_id = conf.get("tableId") if conf is not None else None
        if table_id:
            return str(table_id)
        location = table_location(descriptor.getLogPath())
        return self.client.get_table(location=location).table_id

    def _check_commit_dir(self, table_id: str) -> None:
        """Raise CommitDirMismatchError if the owner stages this table where this Delta cannot read."""
        with self._lock:
            known = self._checked.get(table_id)
        if known is None:
            known = self.client.get_table(table_id).commit_dir
            with self._lock:
                self._checked[table_id] = known
        if known != self.commit_dir:
            raise CommitDirMismatchError(
                f"table {table_id} stages commits in _delta_log/{known}, but this delta-spark reads only "
                f"_delta_log/{self.commit_dir}; re-register the table with commit_dir={self.commit_dir!r} "
                "or use a matching delta-spark version"
            )

    def _commit_path(self, log_path: Any, owner_path: str) -> Any:
        """The commit file as a Hadoop Path under Delta's own ``_delta_log`` Path.

        The owner names files with its own scheme (``s3://``, ``file://``); Delta must open them through the
        file system it uses for the table (e.g. ``s3a://``), so only the part below ``_delta_log/`` is kept.
        """
        marker = "/_delta_log/"
        at = owner_path.rfind(marker)
        if at < 0:
            return self._jvm.org.apache.hadoop.fs.Path(owner_path)
        return self._jvm.org.apache.hadoop.fs.Path(log_path, owner_path[at + len(marker):])

    def _java_commit(self, c: Any, log_path: Any) -> Any:
        path = self._commit_path(log_path, c.path)
        status = self._jvm.org.apache.hadoop.fs.FileStatus(
            c.file_size, False, 1, 0, c.file_modification_time, path
        )
        return self._jvm.io.delta.storage.commit.Commit(c.version, status, c.commit_timestamp)

    def _drain(self, actions: Any) -> bytes:
        # One JVM-side call reads the whole iterator; element-by-element py4j calls would cost a round trip each.
        converters = self._jvm.scala.collection.JavaConverters
        text = str(converters.asScalaIterator(actions).mkString("", "\n", "\n"))
        return b"" if text == "\n" else text.encode("utf-8")

    # -- CommitCoordinatorClient ----------------------------------------------------------------------

    def registerTable(  # noqa: N802 - Java interface name
        self, logPath: Any, tableIdentifier: Any, currentVersion: int, currentMetadata: Any, currentProtocol: Any
    ) -> Any:
        """Register the table with the owner; returns the table conf as a java.util.Map.

        Raises IllegalStateException (Java) when the owner refuses.
        """
        location = table_location(logPath)
        try:
            info = self.client.register_table(location, current_version=int(currentVersion), commit_dir=self.commit_dir)
        except CommitOwnerError as e:
            raise self._errors.illegal_state(f"commit owner refused to register {location}: {e.message}") from e
        conf = self._jvm.java.util.HashMap()
        for k, v in info.table_conf.items():
            conf.put(str(k), str(v))
        return conf

    def commit(  # noqa: PLR0913 - Java interface signature
        self, logStore: Any, hadoopConf: Any, tableDescriptor: Any, commitVersion: int, actions: Any,
        updatedActions: Any,
    ) -> Any:
        """Ratify one version; returns a CommitResponse. Raises CommitFailedException (Java) with Delta's flags."""
        version = int(commitVersion)
        try:
            table_id = self._table_id(tableDescriptor)
            self._check_commit_dir(table_id)
            data = self._drain(actions)
            result = self.client.commit(
                table_id, version, data, idempotency_key=_idempotency_key(table_id, version, data)
            )
        except CommitFailedError as e:
            raise self._errors.commit_failed(e.retryable, e.conflict, e.message) from e
        except CommitStateUnknownError as e:
            # Same version, same bytes, same key: Delta's retry either learns the first outcome or lands it.
            raise self._errors.commit_failed(True, False, e.message) from e
        except CommitOwnerError as e:
            raise self._errors.commit_failed(e.retryable and not e.conflict, False, e.message) from e
        except Py4JJavaError:
            raise
        except Exception as e:  # noqa: BLE001 - never let a Python bug look like success or a conflict
            raise self._errors.commit_failed(False, False, f"commit-owner bridge error: {e!r}") from e
        return self._jvm.io.delta.storage.commit.CommitResponse(
            self._java_commit(result, tableDescriptor.getLogPath())
        )

    def getCommits(self, tableDescriptor: Any, startVersion: int | None, endVersion: int | None) -> Any:  # noqa: N802
        """Unbackfilled commits in range and the latest version; raises IllegalStateException (Java) on failure."""
        try:
            table_id = self._table_id(tableDescriptor)
            self._check_commit_dir(table_id)
            page = self.client.get_commits(
                table_id,
                None if startVersion is None else int(startVersion),
                None if endVersion is None else int(endVersion),
            )
        except CommitOwnerError as e:
            raise self._errors.illegal_state(f"getCommits failed: {e.message}") from e
        commits = self._jvm.java.util.ArrayList()
        log_path = tableDescriptor.getLogPath()
        for c in page.commits:
            commits.add(self._java_commit(c, log_path))
        return self._jvm.io.delta.storage.commit.GetCommitsResponse(commits, page.latest_table_version)

    def backfillToVersion(  # noqa: N802
        self, logStore: Any, hadoopConf: Any, tableDescriptor: Any, version: int, lastKnownBackfilledVersion: Any
    ) -> None:
        """Return once every version <= ``version`` is published; raises IOException (Java) otherwise."""
        try:
            table_id = self._table_id(tableDescriptor)
            last = None if lastKnownBackfilledVersion is None else int(lastKnownBackfilledVersion)
            self.client.backfill_to_version(table_id, int(version), last)
        except CommitOwnerError as e:
            raise self._errors.io_error(f"backfill to version {version} failed: {e.message}") from e

    def semanticEquals(self, other: Any) -> bool:  # noqa: N802
        """Two clients are interchangeable when they talk to the same owner endpoint.

        Java hands our own clients back as proxies (JavaObject), so they are recognised by ``toString``.
        """
        if isinstance(other, CommitOwnerCoordinatorClient):
            return other.endpoint == self.endpoint
        if isinstance(other, JavaObject):
            try:
                return str(other.toString()) == self.toString()
            except Exception:  # noqa: BLE001 - a foreign client that cannot even describe itself
                return False
        return False

    # java.lang.Object methods a Java caller may invoke on the proxy
    def toString(self) -> str:  # noqa: N802
        return f"{_TO_STRING_PREFIX}{self.endpoint}"

    def hashCode(self) -> int:  # noqa: N802
        return int.from_bytes(hashlib.sha256(self.toString().encode()).digest()[:4], "big") & 0x7FFFFFFF

    def equals(self, other: Any) -> bool:
        return self.semanticEquals(other)

    def createStagingTable(self, tableIdentifier: Any) -> Any:  # noqa: N802
        raise self._errors.illegal_state("commit-owner does not create catalog staging tables")


class _Builder:
    """Delta's ``CommitCoordinatorBuilder``: one client per owner endpoint, shared by every table."""

    class Java:
        implements = [BUILDER_INTERFACE]

    def __init__(self, bridge: OwnerBridge) -> None:
        self._bridge = bridge

    def getName(self) -> str:  # noqa: N802
        return self._bridge.name

    def build(self, spark: Any, conf: Any) -> CommitOwnerCoordinatorClient:
        jconf = self._bridge.gateway.jvm.scala.collection.JavaConverters.mapAsJavaMap(conf)
        endpoint = jconf.get("endpoint") if jconf is not None else None
        return self._bridge.client_for(str(endpoint) if endpoint else None)


@dataclass
class OwnerBridge:
    """What :func:`use_commit_owner` registered in one driver JVM."""

    gateway: Any
    name: str
    endpoint: str
    commit_dir: str
    token: str | None = None
    timeout: float = 30.0
    deadline: float = 120.0
    _clients: dict[str, CommitOwnerCoordinatorClient] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client_for(self, endpoint: str | None = None) -> CommitOwnerCoordinatorClient:
        """The coordinator client for ``endpoint`` (default: the registered one), created once."""
        endpoint = (endpoint or self.endpoint).rstrip("/")
        with self._lock:
            existing = self._clients.get(endpoint)
            if existing is None:
                # Delta's getCommits also runs inside commits: it keeps the whole deadline to reach the owner.
                http = CommitOwnerClient(endpoint, token=self.token, timeout=self.timeout, deadline=self.deadline,
                                         connect_deadline=self.deadline)
                existing = CommitOwnerCoordinatorClient(self.gateway, http, self.commit_dir)
                self._clients[endpoint] = existing
            return existing


_REGISTERED: dict[tuple[int, str], OwnerBridge] = {}
_REGISTRY_LOCK = threading.Lock()


def use_commit_owner(
    spark: Any,
    *,
    endpoint: str,
    name: str = "commit-owner",
    token: str | None = None,
    timeout: float = 30.0,
    deadline: float = 120.0,
) -> OwnerBridge:
    """Register this owner as delta-spark commit coordinator ``name`` in ``spark``'s driver JVM.

    Idempotent: a second call with the same name and endpoint returns the first registration.
    Tables whose ``delta.coordinatedCommits.commitCoordinator-preview`` property is ``name`` then commit,
    read unbackfilled commits and backfill through the owner (``commitCoordinatorConf-preview`` may carry an
    ``endpoint`` that overrides ``endpoint`` per table). The token, if any, stays in this process; it is
    never written to table properties. ``timeout`` bounds one HTTP request, ``deadline`` the retries of one
    call; when the deadline passes, a commit reaches Delta as retryable (true, false) and Delta retries it with
    the same bytes, hence the same idempotency key.

    Raises DeltaSparkUnavailableError when delta-spark is missing or older than 3.3, ValueError when ``name``
    is already registered in this JVM by something else or with another endpoint.
    """
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    jvm = gateway.jvm
    check_delta_spark(jvm)
    endpoint = endpoint.rstrip("/")
    CommitOwnerClient(endpoint)  # validates the URL before anything is registered
    key = (id(gateway), name)
    with _REGISTRY_LOCK:
        existing = _REGISTERED.get(key)
        if existing is not None:
            if existing.endpoint != endpoint:
                raise ValueError(
                    f"commit coordinator {name!r} is already registered for {existing.endpoint}; "
                    f"pick another name for {endpoint}"
                )
            return existing
        provider = _java_class(jvm, PROVIDER_CLASS)
        if provider is None:  # check_delta_spark found it a moment ago
            raise DeltaSparkUnavailableError(f"{PROVIDER_CLASS} vanished from the driver JVM")
        try:
            taken = bool(provider.getRegisteredCoordinatorNames().contains(name))
        except Py4JJavaError as e:
            clear = explain_missing_classes(e)
            if clear is None:
                raise
            raise clear from e
        if taken:
            raise ValueError(f"commit coordinator {name!r} is already registered in this JVM by another builder")
        ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
        _install_log_filter()
        for params in ("python_parameters", "callback_server_parameters"):
            p = gateway.__dict__.get(params)
            if p is not None:
                p.propagate_java_exceptions = True
        bridge = OwnerBridge(
            gateway=gateway, name=name, endpoint=endpoint, commit_dir=staged_commit_dir(jvm), token=token,
            timeout=timeout, deadline=deadline,
        )
        provider.registerBuilder(_Builder(bridge))
        _REGISTERED[key] = bridge
        return bridge


__all__ = [
    "CommitDirMismatchError",
    "CommitOwnerCoordinatorClient",
    "DeltaSparkUnavailableError",
    "OwnerBridge",
    "check_delta_spark",
    "explain_missing_classes",
    "staged_commit_dir",
    "table_location",
    "use_commit_owner",
]
