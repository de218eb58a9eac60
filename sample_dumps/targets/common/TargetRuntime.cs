// Shared by the target programs of clrlayout's sample dumps (compiled into each: see make_dumps.py).
using System;

static class TargetRuntime
{
    // The runtime's version as clrlayout names it: Environment.Version from .NET Core 3.0 on; .NET Core 2.x
    // reports 4.0.30319.42000 there.  The shared framework's folder, where the host found CoreLib, is named
    // after its version (...\Microsoft.NETCore.App\2.1.8\); a self-contained app's folder is not (2.2.5 under
    // sample_dumps/corehost.py): then CoreLib's informational version names the release branch
    // ("4.6.27617.05 @BuiltBy: ... @Branch: release/2.2 @SrcCode: ...").
    public static string Version()
    {
        Version v = Environment.Version;
        if (v.Major != 4)
            return v.ToString();
        string dir = System.IO.Path.GetDirectoryName(typeof(object).Assembly.Location) ?? "";
        string folder = System.IO.Path.GetFileName(dir);
        Version parsed;
        if (System.IO.Path.GetFileName(System.IO.Path.GetDirectoryName(dir) ?? "") == "Microsoft.NETCore.App"
                && folder.Split('.').Length == 3 && System.Version.TryParse(folder, out parsed))
            return folder;
        foreach (object a in typeof(object).Assembly.GetCustomAttributes(
                     typeof(System.Reflection.AssemblyInformationalVersionAttribute), false))
        {
            string s = ((System.Reflection.AssemblyInformationalVersionAttribute)a).InformationalVersion;
            int at = s.IndexOf("@Branch: release/");
            if (at >= 0)
            {
                string rest = s.Substring(at + "@Branch: release/".Length);
                int end = rest.IndexOf(' ');
                return end < 0 ? rest : rest.Substring(0, end);
            }
        }
        return v.ToString();
    }
}
