/// The software a terminal runs, as its hellos announce it and `intercomctl site` shows it. The
/// release number is raised by hand with each release; scripts/build-deb.sh reads it from here and
/// appends the commit, so that the package and the terminals name the same release.
public enum Software {
    public static let version = "0.10.0"
}
