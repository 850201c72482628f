"""Sends running ahead of receives by at most a queue's depth: how direct and halving-doubling stream.

`rounds(ctx, count, send, take)` runs `count` rounds in which a member
sends and then takes what its peers sent it in the same round. Every member
runs the same rounds in the same order, with at most one message to each
peer per round, so sender and receiver agree on every message, and a
member's message to a peer in round s is at most its s-th on that queue.

The sends of round s are *posted* once round s − n_slots is taken: started
as a program of their own on the member's PE (`PeProgram.start`) that first
waits for the sends of round s − 1, so each queue keeps its order while the
member goes on taking. The member never waits for its sends unless a take
asks for them, so its links are asked for the next message while it copies
out, reduces and posts stores, instead of idling through every member's
takes in lock step. A round's sends run one after another in one program,
not one program per peer: two of a PE's sends waiting for the same link
would book it one after the other, the second ahead of time, which under
FIFO reservation (ADR 0003) holds the PE's TCM port — the first hop of
every message — idle until then.

Why this cannot deadlock. A member's take of round i waits on an empty
queue only while the sender has not sent its round-i message: the sender's
takes are still in round i − n_slots or earlier (round i not posted), or its
sends are waiting on a full queue in round i or earlier, whose receiver has
taken at most all but n_slots of them and so is taking round i − n_slots or
earlier. A take may also wait for its own round's sends (`sent`), which wait
only for such a receiver. Each wait is on a member taking an earlier round,
so the member taking the earliest round can always move, one slot per
queue included.
"""

from __future__ import annotations


def rounds(ctx, count: int, send, take):
    """Rounds 0..count−1 of sends and takes. `send(s)`, called when round s is posted (once round s − n_slots
    is taken), may start work and returns the steps that send round s, run after round s − 1's; `take(s,
    sent)` is the steps that take round s, run by the member in round order, `sent` the `Pending` of round
    s's sends (its result: what their steps return)."""
    window, posted, sends, last = ctx.settings.n_slots, 0, {}, None
    for index in range(count):
        while posted < min(count, index + window):
            sends[posted] = last = ctx.start(send_after, last, send(posted))
            posted += 1
        yield from take(index, sends.pop(index))


def send_after(previous, steps):
    """`steps` (sends), once `previous` (started sends to the same peers, or None) is done: started in turn, they
    keep each queue's messages in order. Returns what `steps` return."""
    if previous is not None:
        yield from previous.wait_steps()
    return (yield from steps)
