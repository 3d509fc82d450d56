"""The cook list: roots from the build file, the dependency closure, cycles, and `why`."""
