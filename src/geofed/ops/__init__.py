"""Operations: capabilities that watch a federation over time."""
