// Shared by the target programs of clrlayout's sample dumps (compiled into each: see make_dumps.py).
using System;

static class TargetRuntime
{
    // The runtime's version as clrlayout names it: Environment.Version from .NET Core 3.0 on; .NET Core 2.x
    // reports 4.0.30319.42000 there.  Its host (hostpolicy) gives the product version as the runtime property
    // FX_PRODUCT_VERSION; without a host (sample_dumps/corehost.py), CoreLib's informational version names the
    // release branch ("4.6.27617.05 @BuiltBy: ... @Branch: release/2.2 @SrcCode: ...").
    public static string Version()
    {
        Version v = Environment.Version;
        if (v.Major != 4)
            return v.ToString();
        string product = AppContext.GetData("FX_PRODUCT_VERSION") as string;
        if (!string.IsNullOrEmpty(product))
            return product;
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
