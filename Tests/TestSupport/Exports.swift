// The rig's instruments (daemons as processes, talkers, ears, keys, speech scores) live in
// RigKit, shared with the main job (intercom-demo); every test that imports TestSupport has them.
@_exported import RigKit
