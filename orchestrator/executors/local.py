"""The local executor: units run one after another in the driver process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..files.projectfiles import FilePolicy, ProjectFiles
from . import Finished, StoreTarget, WorkItem, run_item, worker_label


class LocalExecutor:
    name = "local"
    in_driver = True

    def __init__(
        self, root: str, policy: FilePolicy | None = None, files: ProjectFiles | None = None
    ) -> None:
        self.root = root
        self.policy = policy
        self.label = f"driver ({worker_label()})"
        # One reader of the project for every unit (the session's, which its scan taught which
        # folders are real): a reader per unit checked each unit's folders again.
        self.files = files if files is not None else ProjectFiles(root, policy)

    def execute(
        self,
        fn: Callable,
        items: list[WorkItem],
        shared: Any,
        store: StoreTarget | None = None,
    ) -> Iterator[Finished]:
        """Run the items here, one after another: the driver stores what they make (`store`
        is for workers in other processes)."""
        for item in items:
            yield run_item(
                fn, item, shared, self.root, True, self.label, policy=self.policy, files=self.files
            )

    def close(self) -> None:
        """Nothing to release: units ran in this process."""
