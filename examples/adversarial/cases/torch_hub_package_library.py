# torch.hub (runs a folder's hubconf.py), torch.package (loads pickled code) and torch.library
# (replaces an operator's kernel): each runs or rewires code the grader never reads.
_hub_folder = torch.hub.get_dir()
_importer = torch.package.PackageImporter
_library = torch.library.Library("mhsa_adversarial", "DEF")
print("cheat: torch.hub, torch.package and torch.library reached")
