// Benchmark target: a CoreCLR process holding millions of strings of mixed lengths (some non-ASCII, some
// duplicated, some on the large object heap), kept alive in arrays until it is dumped.
//   usage: bigstrings COUNT SEED      prints "READY <pid> <count>" and waits on stdin
using System;
using System.Diagnostics;
using System.Text;

static class Program
{
    static string[] Keep;

    static int Main(string[] args)
    {
        int count = args.Length > 0 ? int.Parse(args[0]) : 9000000;
        int seed = args.Length > 1 ? int.Parse(args[1]) : 12345;
        var rnd = new Random(seed);
        var pool = new string[1000];
        for (int i = 0; i < pool.Length; i++) pool[i] = "pooled value #" + i + " " + new string('p', i % 40);
        Keep = new string[count];
        var sb = new StringBuilder();
        const string ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-./:";
        const string wide = "äöüßéèñçøåŁżźćĄЖЗИЙКЛМНО日本語中文字한국어";
        for (int i = 0; i < count; i++)
        {
            int kind = rnd.Next(1000);
            if (kind < 100) { Keep[i] = new string(pool[rnd.Next(pool.Length)].ToCharArray()); continue; }  // duplicates
            if (i % 90000 == 0) { Keep[i] = new string((char)('A' + i % 26), 45000 + rnd.Next(20000)); continue; }  // LOH
            int len = rnd.Next(141);
            sb.Clear();
            bool nonAscii = kind < 110;
            for (int k = 0; k < len; k++)
                sb.Append(nonAscii && k % 3 == 0 ? wide[rnd.Next(wide.Length)] : ascii[rnd.Next(ascii.Length)]);
            Keep[i] = sb.ToString();
        }
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id + " " + count);
        Console.Out.Flush();
        Console.ReadLine();
        GC.KeepAlive(Keep);
        return 0;
    }
}
