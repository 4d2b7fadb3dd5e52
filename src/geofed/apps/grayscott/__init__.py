"""Gray-Scott reaction-diffusion at one site, analysed and visualised at another.

The scenario of seed 000, section 3: a 3-D Gray-Scott simulation (MPI, 3-D domain
decomposition) stages every output step through ADIOS2's SST engine to consumers
at the other site: a PDF analysis (per-slice histograms of U and V), a 2-D
cross-section plotter and a PDF plotter. Every step carries per-plane CRC32s, so
both sides can prove that nothing was lost or altered on the way.

    settings     the tutorial-shaped settings JSON and its checks
    model        the numerics: initial state, decomposition, one Euler step
    simulation   the MPI program (ghost exchange, output through a stream)
    stream       SST/BP5 writer and reader with checksums and timings
    pdf, gplot, pdfplot   the consumers
    workflow     `geofed workflow grayscott`: places, starts and watches all parts
    bench        `geofed bench grayscott`: staging overhead across a link
"""
