"""Training stages of one cell joined into one command, so that a GPU trains their seeds as one vmapped step.

Every training stage of dvc.yaml trains one seed (``study train --model M --fraction F --seed S ...``), so DVC tracks
each seed's dependencies and outputs on its own: adding a seed adds stages and reruns nothing else. Where
``train.cell`` asks for more than one seed per step on the device, the engine joins the commands of the stages that
differ only in their seed (their ``--seed``, ``--subset``, ``--run`` and ``--teacher``) into one ``study train``
with those repeated, which trains them as a cell (:func:`study.train.stage.run_cell`); each stage is then recorded in
dvc.lock with its own command, as if it had run alone. A cell is the stages to run of one (model, fraction, budget),
in the order of their seeds, cut into chunks of ``train.cell`` seeds; it starts once all of its stages may start, so
a distilled student's cell waits for every seed's teacher.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable

# The arguments that name one seed's run: everything else in the command is the cell's.
PER_SEED = ("--seed", "--subset", "--run", "--teacher")


def split_command(command: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``(the cell's arguments, the seed's arguments)`` of a ``study train`` command of one seed; None for any other
    command (another stage, a seed list already, an argument written ``--x=y``)."""
    words = shlex.split(command)
    if words[:2] != ["study", "train"] or any(w.startswith("--") and "=" in w for w in words):
        return None
    shared: list[str] = []
    own: list[str] = []
    i = 2
    while i < len(words):
        word = words[i]
        if word in PER_SEED:
            if i + 1 >= len(words):
                return None
            own += [word, words[i + 1]]
            i += 2
            continue
        shared.append(word)
        i += 1
    if own.count("--seed") != 1:
        return None
    return tuple(shared), tuple(own)


def _seed(command: str) -> int:
    own = split_command(command)[1]
    return int(own[own.index("--seed") + 1])


def joined(commands: list[str]) -> str:
    """One ``study train`` command training the seeds of ``commands`` (one-seed commands of one cell) together."""
    parts = [split_command(command) for command in commands]
    if any(part is None for part in parts) or len({shared for shared, _own in parts}) != 1:
        raise ValueError(f"not one-seed training commands of one cell: {commands}")
    shared = parts[0][0]
    return shlex.join(["study", "train", *shared, *(word for _shared, own in parts for word in own)])


def cells(ready: Iterable[str], waiting: Iterable[str], command_of: Callable[[str], tuple[str, ...]],
          size: int) -> tuple[list[list[str]], list[str]]:
    """The ready stages as groups to start, each a cell (chunks of ``size`` in seed order) or one stage; and
    the ready stages held back because a stage of their cell is still ``waiting`` for its upstream stages.

    ``ready`` and ``waiting`` are stage names in pipeline order; ``command_of`` gives a stage's command lines."""
    ready = list(ready)

    def key(name: str):
        commands = command_of(name)
        part = split_command(commands[0]) if len(commands) == 1 else None
        return None if part is None else part[0]

    if size <= 1:
        return [[name] for name in ready], []
    pending = {key(name) for name in waiting} - {None}
    groups: list[list[str]] = []
    by_cell: dict[tuple[str, ...], list[str]] = {}
    held: list[str] = []
    for name in ready:
        k = key(name)
        if k is None:
            groups.append([name])
        elif k in pending:
            held.append(name)
        else:
            by_cell.setdefault(k, []).append(name)
    for members in by_cell.values():
        members.sort(key=lambda name: _seed(command_of(name)[0]))  # DVC's plan need not follow the seeds
        groups += [members[i:i + size] for i in range(0, len(members), size)]
    return groups, held
