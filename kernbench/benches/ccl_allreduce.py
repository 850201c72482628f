"""All-reduce bench (stand-in until collectives land: prints the machine it would run on)."""


def run(torch):
    spec = torch.spec
    mesh = spec["sip"]["cube_mesh"]
    layout = spec["cube"]["pe_layout"]
    pes_per_cube = len(layout["corners"]) * layout["pe_per_corner"]
    print(
        f"machine: {spec['system']['sips']['count']} SIPs x {mesh['w']}x{mesh['h']} cubes "
        f"x {pes_per_cube} PEs ({spec['system']['inter_sip']['shape']} links)"
    )
