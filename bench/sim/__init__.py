"""The scheduler simulator: real placement policies against the emulator's cost model."""
