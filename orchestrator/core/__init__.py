"""The engine's core: the stage graph and the loop that runs it, a unit's life (planned, looked
up, run, stored), what changed since a stage last ran, the values passed between stages, and the
context a stage's driver code sees. It knows no stage: it runs what is registered."""
