"""What a run keeps and writes: the draw buffers and what is kept of them (in memory, a
stream on disk, files), reading files back, names, merging processes, provenance."""
